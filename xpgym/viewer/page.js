// xpgym trajectory viewer: the page's only script (xpgym/viewer/page.py inlines it).
//
// Contracts:
// * Data: the JSON of the application/json script element #xpgym-data (see page.py):
//   {title, source, episodes: [view episode], tokens: [token view | null] | null,
//    vocab: {id: text} | null}.
// * Model text is untrusted: every string from the data reaches the DOM through textContent
//   or an attribute (title, dataset, an image src checked to be a raster data URL); this
//   file never assigns innerHTML/outerHTML and never calls insertAdjacentHTML or eval.
// * Large files: the episode list is virtual (only the rows in view, plus a margin, exist in
//   the DOM); an episode's section is built when it is opened; the text searched is
//   gathered in idle time after load (or by the first search that needs it).
"use strict";

(function () {
  const DATA = JSON.parse(document.getElementById("xpgym-data").textContent);
  const EPISODES = DATA.episodes;
  const TOKENS = DATA.tokens;
  const VOCAB = DATA.vocab;
  const ROW_HEIGHT = 26; // px; must match .ep-row height in page.css
  const MARGIN_ROWS = 10;
  const KINDS = ["prompt", "policy", "env"];
  const IMAGE_URL = /^data:image\/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/]*={0,2}$/;

  const byId = (id) => document.getElementById(id);
  const list = byId("list");
  const spacer = byId("list-spacer");
  const detail = byId("detail");
  const count = byId("count");
  const state = { env: "", status: "", query: "", shown: [], selected: -1 };

  function node(tag, text, className) {
    const n = document.createElement(tag);
    if (text !== undefined && text !== null) n.textContent = String(text);
    if (className) n.className = className;
    return n;
  }

  function number(x) {
    if (x === null || x === undefined) return "-";
    return Number.isInteger(x) ? String(x) : x.toFixed(3);
  }

  function returnText(ep) {
    if (ep.return !== null) return number(ep.return);
    if (ep.returns) {
      return Object.entries(ep.returns).map(([agent, r]) => agent + " " + number(r)).join(", ");
    }
    return "-";
  }

  // ---- search ------------------------------------------------------------------------
  const haystacks = new Array(EPISODES.length);

  function gather(value, out) {
    if (typeof value === "string") out.push(value);
    else if (typeof value === "number" || typeof value === "boolean") out.push(String(value));
    else if (Array.isArray(value)) value.forEach((v) => gather(v, out));
    else if (value && typeof value === "object") Object.values(value).forEach((v) => gather(v, out));
  }

  function haystack(i) {
    if (haystacks[i] === undefined) {
      const ep = EPISODES[i];
      const out = [ep.env, ep.error || "", ep.model || ""];
      gather(ep.info, out);
      for (const s of ep.steps) {
        gather([s.agent, s.observation, s.action, s.tool_calls, s.truncated_reason, s.info], out);
      }
      haystacks[i] = out.join("\n").toLowerCase();
    }
    return haystacks[i];
  }

  // Gather the search text in idle time after load, a slice at a time, so that the first
  // search does not have to (a search before it is done gathers the rest itself).
  function gatherWhenIdle(start) {
    const idle = window.requestIdleCallback || ((f) => setTimeout(f, 50));
    idle(() => {
      const end = Math.min(EPISODES.length, start + 500);
      for (let i = start; i < end; i++) haystack(i);
      if (end < EPISODES.length) gatherWhenIdle(end);
    });
  }

  // ---- the list ----------------------------------------------------------------------
  function applyFilters() {
    const query = state.query.trim().toLowerCase();
    const shown = [];
    for (let i = 0; i < EPISODES.length; i++) {
      const ep = EPISODES[i];
      if (state.env && ep.env !== state.env) continue;
      if (state.status && ep.status !== state.status) continue;
      if (query && !haystack(i).includes(query)) continue;
      shown.push(i);
    }
    state.shown = shown;
    count.textContent = shown.length + " of " + EPISODES.length + " episodes";
    count.dataset.shown = String(shown.length);
    spacer.style.height = shown.length * ROW_HEIGHT + "px";
    list.scrollTop = 0;
    renderRows();
  }

  let renderedRows = [];
  function renderRows() {
    const top = list.scrollTop;
    const first = Math.max(0, Math.floor(top / ROW_HEIGHT) - MARGIN_ROWS);
    const last = Math.min(
      state.shown.length,
      Math.ceil((top + list.clientHeight) / ROW_HEIGHT) + MARGIN_ROWS
    );
    renderedRows.forEach((row) => row.remove());
    renderedRows = [];
    for (let k = first; k < last; k++) {
      const i = state.shown[k];
      const ep = EPISODES[i];
      const row = node("div", null, "row ep-row " + ep.status + (i === state.selected ? " selected" : ""));
      row.style.top = k * ROW_HEIGHT + "px";
      row.dataset.index = String(i);
      row.title = ep.error || "";
      for (const cell of [i, ep.env, ep.seed === null ? "-" : ep.seed, returnText(ep), ep.turns, ep.status]) {
        row.appendChild(node("span", cell));
      }
      list.appendChild(row);
      renderedRows.push(row);
    }
  }

  let frameRequested = false;
  function renderRowsSoon() {
    if (frameRequested) return;
    frameRequested = true;
    requestAnimationFrame(() => {
      frameRequested = false;
      renderRows();
    });
  }

  // ---- one episode -------------------------------------------------------------------
  function jsonBlock(label, value, open) {
    const block = node("details", null, "json");
    block.open = Boolean(open);
    block.appendChild(node("summary", label));
    block.appendChild(node("pre", JSON.stringify(value, null, 2)));
    return block;
  }

  function imagesBlock(label, urls) {
    const block = node("div", null, "images");
    block.appendChild(node("div", label, "label"));
    for (const url of urls) {
      if (typeof url !== "string" || !IMAGE_URL.test(url)) continue;
      const img = document.createElement("img");
      img.src = url;
      img.alt = label;
      block.appendChild(img);
    }
    return block;
  }

  function textNode(value, className) {
    return node("pre", typeof value === "string" ? value : JSON.stringify(value, null, 2), className);
  }

  function messageContent(content) {
    if (!Array.isArray(content)) return [textNode(content)];
    return content.map((part) => {
      if (part && part.type === "text") return textNode(part.text);
      const url = part && part.image_url && (part.image_url.url || part.image_url);
      if (typeof url === "string" && IMAGE_URL.test(url)) return imagesBlock("image", [url]);
      return textNode(part);
    });
  }

  function observationNode(observation) {
    if (!Array.isArray(observation)) return textNode(observation, "observation");
    const box = node("div", null, "messages");
    for (const message of observation) {
      const m = node("div", null, "message " + (message && message.role ? "role-" + message.role : ""));
      m.appendChild(node("div", message && message.role, "role"));
      messageContent(message ? message.content : message).forEach((n) => m.appendChild(n));
      box.appendChild(m);
    }
    return box;
  }

  function labelled(label, child) {
    const box = node("div", null, "field");
    box.appendChild(node("div", label, "label"));
    box.appendChild(child);
    return box;
  }

  function toolCallNode(call) {
    const box = node("div", null, "tool-call " + (call && call.ok === false ? "failed" : "ok"));
    const name = call && call.name !== null && call.name !== undefined ? call.name : "(unreadable name)";
    box.appendChild(node("div", "tool call: " + name + (call && call.ok === false ? " (failed)" : ""), "label"));
    if (call && call.arguments !== undefined) box.appendChild(textNode(call.arguments, "arguments"));
    if (call && call.info && Object.keys(call.info).length) box.appendChild(jsonBlock("tool info", call.info));
    return box;
  }

  function stepSection(step, t) {
    const section = node("section", null, "turn");
    const head = node("h3", "Turn " + t + (step.agent !== null ? " · " + step.agent : ""));
    const flags = ["reward " + number(step.reward)];
    if (step.terminated) flags.push("terminated");
    if (step.truncated) flags.push("truncated" + (step.truncated_reason ? ": " + step.truncated_reason : ""));
    else if (step.truncated_reason) flags.push("truncated_reason: " + step.truncated_reason);
    head.appendChild(node("span", flags.join(" · "), "flags"));
    section.appendChild(head);
    section.appendChild(labelled("observation", observationNode(step.observation)));
    if (step.images.length) section.appendChild(imagesBlock("observation images", step.images));
    section.appendChild(labelled("action", textNode(step.action, "action")));
    for (const call of step.tool_calls || []) section.appendChild(toolCallNode(call));
    if (Object.keys(step.info).length) section.appendChild(jsonBlock("info", step.info));
    return section;
  }

  function tokenSection(view) {
    const block = node("details", null, "tokens");
    block.open = true;
    block.appendChild(node("summary", "tokens (" + (VOCAB ? "text; hover for ids" : "ids") + ")"));
    if (view.unavailable) {
      block.appendChild(node("p", "token view unavailable: " + view.unavailable, "note"));
      return block;
    }
    const legend = node("div", null, "legend");
    legend.appendChild(node("span", "prompt (mask 0)", "seg prompt"));
    legend.appendChild(node("span", "policy (mask 1: trained)", "seg policy"));
    legend.appendChild(node("span", "env / tool (mask 0)", "seg env"));
    block.appendChild(legend);
    for (const row of view.rows) {
      const line = node("div", null, "token-row" + (VOCAB ? "" : " ids"));
      if (view.rows.length > 1) line.appendChild(node("div", "row from turn " + row.first_turn, "note"));
      for (const [kind, turn, ids] of row.segments) {
        const seg = node("span", null, "seg " + KINDS[kind]);
        seg.title = KINDS[kind] + (turn >= 0 ? ", turn " + turn : "") + ", " + ids.length + " tokens";
        for (const id of ids) {
          const text = VOCAB ? VOCAB[id] : undefined;
          const tok = node("span", text === undefined ? String(id) : text, "tok");
          tok.title = "id " + id;
          seg.appendChild(tok);
        }
        line.appendChild(seg);
      }
      block.appendChild(line);
    }
    return block;
  }

  function openEpisode(i) {
    const ep = EPISODES[i];
    if (!ep) return;
    state.selected = i;
    detail.replaceChildren();
    detail.appendChild(node("h2", "Episode " + i + ": " + ep.env));
    const facts = node("dl", null, "facts");
    const fact = (key, value) => {
      if (value === null || value === undefined || value === "") return;
      facts.appendChild(node("dt", key));
      facts.appendChild(node("dd", value, key === "status" ? ep.status : ""));
    };
    fact("status", ep.status);
    fact("seed", ep.seed);
    fact("sample", ep.sample);
    fact("group", ep.group);
    fact("model", ep.model);
    fact("return", returnText(ep));
    fact("turns", ep.turns);
    fact("truncated", ep.truncated_reason);
    fact("error", ep.error);
    detail.appendChild(facts);
    if (Object.keys(ep.info).length) detail.appendChild(jsonBlock("episode info", ep.info));
    if (TOKENS && TOKENS[i]) detail.appendChild(tokenSection(TOKENS[i]));
    ep.steps.forEach((step, t) => detail.appendChild(stepSection(step, t)));
    if (ep.final_images.length) detail.appendChild(imagesBlock("final observation images", ep.final_images));
    detail.scrollTop = 0;
    try {
      history.replaceState(null, "", "#episode-" + i);
    } catch (e) {
      // some browsers refuse history changes on file:// pages; the link is a convenience
    }
    renderRows();
  }

  function moveSelection(delta) {
    const k = state.shown.indexOf(state.selected) + delta;
    if (k < 0 || k >= state.shown.length) return;
    openEpisode(state.shown[k]);
    if (k * ROW_HEIGHT < list.scrollTop || (k + 1) * ROW_HEIGHT > list.scrollTop + list.clientHeight) {
      list.scrollTop = k * ROW_HEIGHT - list.clientHeight / 2;
    }
  }

  // ---- wiring ------------------------------------------------------------------------
  const envCounts = new Map();
  for (const ep of EPISODES) envCounts.set(ep.env, (envCounts.get(ep.env) || 0) + 1);
  const envFilter = byId("env-filter");
  for (const env of [...envCounts.keys()].sort()) {
    const option = node("option", env + " (" + envCounts.get(env) + ")");
    option.value = env;
    envFilter.appendChild(option);
  }
  envFilter.addEventListener("change", () => {
    state.env = envFilter.value;
    applyFilters();
  });
  const statusFilter = byId("status-filter");
  statusFilter.addEventListener("change", () => {
    state.status = statusFilter.value;
    applyFilters();
  });
  const search = byId("search");
  let searchTimer = 0;
  search.addEventListener("input", () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => {
      state.query = search.value;
      applyFilters();
    }, 150);
  });
  list.addEventListener("scroll", renderRowsSoon);
  window.addEventListener("resize", renderRowsSoon);
  list.addEventListener("click", (event) => {
    const row = event.target.closest(".ep-row");
    if (row) openEpisode(Number(row.dataset.index));
  });
  document.addEventListener("keydown", (event) => {
    if (event.target === search) return;
    if (event.key === "j" || event.key === "ArrowDown") moveSelection(1);
    else if (event.key === "k" || event.key === "ArrowUp") moveSelection(-1);
    else return;
    event.preventDefault();
  });

  applyFilters();
  const linked = /^#episode-(\d+)$/.exec(location.hash);
  if (linked) openEpisode(Number(linked[1]));
  else if (state.shown.length) openEpisode(state.shown[0]);
  document.body.dataset.ready = "true";
  gatherWhenIdle(0);
})();
