r"""Customer service in a retail store (tau-bench retail style): a user and a tool-using assistant.

Agents ``"user"`` and ``"assistant"`` take turns (sequential mode); the store, its tools and
its policy are in `xpgym.envs.multiagent.retail`.

Episode rules:

* `reset()` picks a task (``options={"task_id": ...}``, else drawn uniformly with
  `np_random` from the env's tasks) and leases a store holding a fresh copy of the shipped
  orders database from the env's `store_pool` (`retail_store_pool`; by default a private
  pool of one store). The env gives the store back (the pool restocks it) at the next reset
  or at `close`, not when the episode ends, so the final database stays readable. Envs may
  share a pool: an env's reset then waits while all the pool's stores are leased.
  The user sees the task's instruction; the assistant sees the store policy, the tool
  schemas and this protocol.
* The user speaks first. Its action is a message to the assistant; a message that contains
  ``###STOP###`` (`STOP_TOKEN`) ends the conversation.
* The assistant then acts, in one of two ways:

  * a **tool call**: any action containing ``<tool_call>``; the first ``<tool_call>`` block is
    read as ``{"name": ..., "arguments": {...}}`` (`xpgym.core.tools.calls`) and run on the
    database; text around it is ignored and never reaches the user. The result (or error)
    goes back to the assistant, **who acts again**;
  * a **message** to the user (any other text, stripped); then the user speaks.

* The episode ends when the user writes the stop token (both agents terminated) or after
  `max_steps` steps, tool calls included (both truncated).

Observations: ``observe(agent)`` is everything the agent received since its last action,
blocks separated by a blank line: the assistant gets ``"User: ..."`` and ``"Tool result:
..."`` blocks, the user ``"Assistant: ..."`` blocks; at the end both get a closing line. An
agent that just acted observes ``""`` until someone writes to it.

Reward (given in the last step only; all other steps give ``0.0``), as in tau-bench:

======================================================================  ===========  ========
At the end of the episode                                               assistant    user
======================================================================  ===========  ========
the whole database equals the task's goal database, every required      ``1.0``      ``0.0``
output is in some assistant message, and no tool call was refused
anything else                                                           ``0.0``      ``0.0``
======================================================================  ===========  ========

The goal database is the shipped one after the task's reference actions, so a task whose
right answer is to refuse has the unchanged database as its goal. A refused tool call (a
policy violation: see `xpgym.envs.multiagent.retail`) changes nothing but fails the
episode. Malformed or unknown tool calls cost nothing beyond the turn. The user is a
simulator and is not graded: its reward is always ``0.0``. Required outputs are matched
case-insensitively with commas removed (``"1,234.50"`` matches ``1234.50``).

``info`` of the assistant after its own steps: ``correct`` (bool, the episode's success;
`False` until the last step), ``invalid_action`` (a malformed or unknown tool call, or
arguments not matching the schema), ``policy_violation`` (the call was refused),
``parsed_action`` (the tool call block, or `None` for a message), ``tool_calls`` (``[]``,
or ``[{"name", "arguments", "status"}]`` with status ``"ok"``, ``"error"``, ``"refused"`` or
``"invalid"``) and ``step``. ``info`` of the user after its own steps: ``stop`` (bool) and
``step``. In the last step the assistant's info also holds ``correct``, ``db_match``,
``outputs_found`` and ``policy_violations`` (refused calls in the episode).

The scripted user (`CustomerServiceEnv.scripted_user_message`, also what
``sample_random_action("user")`` returns) says the task's ``user_messages`` one per turn,
whatever the assistant said, then the stop token. `CustomerServiceAssistantEnv` (id
``agent:CustomerService-v0``) is the assistant's side as a single-agent env, against the
scripted user or any user policy.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any, ClassVar

from xpgym.core.multiagent import MultiAgentEnv
from xpgym.core.resources import Lease, ResourcePool
from xpgym.core.tools.calls import (
    TOOL_CALL_OPEN,
    find_function_calls,
    format_function_call,
    format_function_instructions,
)
from xpgym.envs.common.arguments import is_int
from xpgym.envs.multiagent.retail import (
    CANCEL_REASONS,
    POLICY,
    TOOL_SCHEMAS,
    RetailStore,
    RetailTask,
    ToolOutcome,
    load_retail_db,
    load_retail_tasks,
    retail_store_pool,
)
from xpgym.envs.multiagent.single_agent import Policy, SingleAgentView

__all__ = [
    "AGENTS",
    "FAILURE_REWARD",
    "STOP_TOKEN",
    "SUCCESS_REWARD",
    "USER_REWARD",
    "CustomerServiceAssistantEnv",
    "CustomerServiceEnv",
]

AGENTS = ("user", "assistant")
STOP_TOKEN = "###STOP###"
SUCCESS_REWARD = 1.0
FAILURE_REWARD = 0.0
USER_REWARD = 0.0

_PROTOCOL = (
    "Each reply of yours is either one tool call or a message to the user (plain text, "
    "without <tool_call>). Only you see tool results: after a tool call you act again. The "
    "user sees your messages and ends the conversation."
)
_CANNED_MESSAGES = (
    "Hello! How can I help you today?",
    "Could you tell me the email address of your account?",
    "Which order is it about?",
    "I'm sorry, I cannot do that.",
    "Done. Is there anything else?",
)
_MALFORMED_CALLS = (
    '<tool_call>{"name": "cancel_pending_order", </tool_call>',
    '<tool_call>{"name": "refund_everything", "arguments": {}}</tool_call>',
)


def _normalised(text: str) -> str:
    return text.lower().replace(",", "")


def _argument_pools(db: dict[str, Any]) -> dict[str, list[Any]]:
    """Values the random assistant draws each tool argument from (some of them wrong)."""
    users = list(db["users"].values())
    items = [i for p in db["products"].values() for i in p["variants"]]
    return {
        "email": [u["email"] for u in users] + ["nobody@example.com"],
        "first_name": [u["name"]["first_name"] for u in users],
        "last_name": [u["name"]["last_name"] for u in users],
        "zip": [u["address"]["zip"] for u in users],
        "user_id": [u["user_id"] for u in users],
        "order_id": [*db["orders"], "#W9999"],
        "product_id": list(db["products"]),
        "query": ["shirt", "lamp", "shoes", ""],
        "reason": list(CANCEL_REASONS),
        "item_ids": [[i] for i in items],
        "new_item_ids": [[i] for i in items],
    }


class CustomerServiceEnv(MultiAgentEnv):
    """A user and a tool-using store assistant; see the module docstring.

    Args:
        task_ids: Ids of the tasks to draw from (default: every shipped task, see
            `xpgym.envs.multiagent.retail.load_retail_tasks`).
        max_steps: Steps (user messages, assistant messages and tool calls) before the
            episode is truncated (at least 2).
        store_pool: Where each episode's store comes from (`retail_store_pool`); default: a
            private pool of one store, closed with the env. A shared pool is not closed.

    Attributes:
        tasks: The tasks drawn from. task: This episode's `RetailTask`.
        store: The `RetailStore` (database and authenticated user) of this episode, leased
            from `store_pool` (before the first reset: an unleased store).
        messages: The conversation as ``(role, text)`` pairs, role ``"user"``,
            ``"assistant"`` (a message to the user), ``"tool_call"`` or ``"tool_result"``.
        steps: Steps taken. user_turns: User messages so far. violations: Refused calls.

    Raises:
        ValueError: an unknown task id, no task, or ``max_steps < 2``.
        TypeError: `max_steps` is not an int.
    """

    metadata: ClassVar[dict[str, Any]] = {"multi_turn": True, "multi_agent": True}

    def __init__(
        self,
        task_ids: Sequence[str] | None = None,
        max_steps: int = 40,
        store_pool: ResourcePool[RetailStore] | None = None,
    ) -> None:
        super().__init__(list(AGENTS), mode="sequential")
        shipped = load_retail_tasks()
        ids = list(shipped) if task_ids is None else list(task_ids)
        unknown = [i for i in ids if i not in shipped]
        if unknown or not ids:
            raise ValueError(
                f"CustomerServiceEnv: task_ids must be a non-empty list of {list(shipped)}, "
                f"got {task_ids!r}"
            )
        if not is_int(max_steps):
            raise TypeError(f"CustomerServiceEnv: max_steps must be an int, got {max_steps!r}")
        if max_steps < 2:
            raise ValueError(f"CustomerServiceEnv: max_steps must be >= 2, got {max_steps}")
        self.tasks: list[RetailTask] = [shipped[i] for i in ids]
        self.max_steps = int(max_steps)
        self._owns_pool = store_pool is None
        self.store_pool = retail_store_pool(1) if store_pool is None else store_pool
        self._store_lease: Lease[RetailStore] | None = None
        db = load_retail_db()
        self._pools = _argument_pools(db)
        self._start(self.tasks[0], RetailStore(db))

    def _start(self, task: RetailTask, store: RetailStore) -> None:
        self.task = task
        self.store = store
        self.messages: list[tuple[str, str]] = []
        self.steps = 0
        self.user_turns = 0
        self.violations = 0
        self._inbox: dict[str, list[str]] = {
            "user": [self._user_prompt()],
            "assistant": [self._assistant_prompt()],
        }

    def _user_prompt(self) -> str:
        return (
            "You are a customer of an online store, chatting with its customer-service "
            f"assistant. {self.task.instruction}\nWrite one short message per turn, as the "
            "customer. Give details such as your email or an order number only when they "
            "are needed. When your request is done, or the assistant says it cannot be done, "
            f"end the conversation by writing {STOP_TOKEN}."
        )

    @staticmethod
    def _assistant_prompt() -> str:
        return f"{POLICY}\n\n{format_function_instructions(TOOL_SCHEMAS)}\n\n{_PROTOCOL}"

    # ------------------------------------------------------------------ hooks

    def _reset(self, options: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
        task_id = (options or {}).get("task_id")
        task: RetailTask | None
        if task_id is None:
            task = self.tasks[int(self.np_random.integers(len(self.tasks)))]
        else:
            task = next((t for t in self.tasks if t.id == task_id), None)
            if task is None:
                raise ValueError(f"{self}: unknown task_id {task_id!r}")
        self._start(task, self._lease_store())
        return {
            "user": {"task_id": task.id},
            "assistant": {"task_id": task.id, "tools": copy.deepcopy(TOOL_SCHEMAS)},
        }

    def _step(
        self, actions: dict[str, str]
    ) -> tuple[dict[str, float], dict[str, bool], dict[str, bool], dict[str, dict[str, Any]]]:
        ((agent, text),) = actions.items()
        if self._store_lease is not None:
            self.store = self._store_lease.resource  # raises if the pool reclaimed it
        self.steps += 1
        self._inbox[agent] = []
        if agent == "user":
            info, ended = self._user_turn(text), STOP_TOKEN in text
            next_agent = "assistant"
        else:
            info, ended = self._assistant_turn(text), False
            next_agent = "assistant" if TOOL_CALL_OPEN in text else "user"
        infos = {agent: info}
        truncated = not ended and self.steps >= self.max_steps
        if not (ended or truncated):
            # The base class selects `next()` after this hook; with this order that is
            # `next_agent` (the assistant keeps the turn after a tool call).
            self.agent_selector.reinit([next_agent, *(a for a in AGENTS if a != next_agent)])
            return {}, {}, {}, infos
        closing = (
            "[The user ended the conversation.]"
            if ended
            else "[The step limit was reached; the conversation is over.]"
        )
        for name in AGENTS:
            self._inbox[name].append(closing)
        outcome = self._outcome()
        infos["assistant"] = {**infos.get("assistant", {}), **outcome}
        rewards = {
            "assistant": SUCCESS_REWARD if outcome["correct"] else FAILURE_REWARD,
            "user": USER_REWARD,
        }
        flags = dict.fromkeys(AGENTS, True)
        return rewards, flags if ended else {}, {} if ended else flags, infos

    def _user_turn(self, text: str) -> dict[str, Any]:
        self.user_turns += 1
        self.messages.append(("user", text))
        self._inbox["assistant"].append(f"User: {text}")
        return {"stop": STOP_TOKEN in text, "step": self.steps}

    def _assistant_turn(self, text: str) -> dict[str, Any]:
        if TOOL_CALL_OPEN not in text:
            message = text.strip()
            self.messages.append(("assistant", message))
            self._inbox["user"].append(f"Assistant: {message}")
            return {
                "correct": False,
                "invalid_action": False,
                "policy_violation": False,
                "parsed_action": None,
                "tool_calls": [],
                "step": self.steps,
            }
        call = find_function_calls(text)[0]
        if call.error is not None or call.name is None:
            outcome = ToolOutcome(f"Error: {call.error}", "invalid")
        else:
            outcome = self.store.call(call.name, call.arguments)
        if outcome.status == "refused":
            self.violations += 1
        self.messages += [("tool_call", call.raw), ("tool_result", outcome.text)]
        self._inbox["assistant"].append(f"Tool result: {outcome.text}")
        return {
            "correct": False,
            "invalid_action": outcome.status == "invalid",
            "policy_violation": outcome.status == "refused",
            "parsed_action": call.raw,
            "tool_calls": [
                {"name": call.name, "arguments": dict(call.arguments), "status": outcome.status}
            ],
            "step": self.steps,
        }

    def _outcome(self) -> dict[str, Any]:
        said = [_normalised(text) for role, text in self.messages if role == "assistant"]
        outputs_found = all(
            any(_normalised(output) in message for message in said) for output in self.task.outputs
        )
        db_match = self.store.db == self.task.goal_db
        return {
            "correct": db_match and outputs_found and self.violations == 0,
            "db_match": db_match,
            "outputs_found": outputs_found,
            "policy_violations": self.violations,
        }

    def observe(self, agent: str) -> str:
        """What `agent` received since its last action (see the module docstring)."""
        return "\n\n".join(self._inbox[agent])

    def scripted_user_message(self) -> str:
        """The scripted user's next message: the task's next user message, else the stop
        token."""
        script = self.task.user_messages
        return script[self.user_turns] if self.user_turns < len(script) else STOP_TOKEN

    def sample_random_action(self, agent: str) -> str:
        """The user: `scripted_user_message()`. The assistant, drawn from `np_random`: a
        canned message (30%), a well-formed tool call with arguments drawn from the
        database's values and a few wrong ones (60%), or a malformed call (10%)."""
        if agent == "user":
            return self.scripted_user_message()
        rng = self.np_random
        kind = rng.random()
        if kind < 0.3:
            return _CANNED_MESSAGES[int(rng.integers(len(_CANNED_MESSAGES)))]
        if kind >= 0.9:
            return _MALFORMED_CALLS[int(rng.integers(len(_MALFORMED_CALLS)))]
        function = TOOL_SCHEMAS[int(rng.integers(len(TOOL_SCHEMAS)))]["function"]
        arguments = {}
        for name in function["parameters"]["properties"]:
            pool = self._pools[name]
            arguments[name] = pool[int(rng.integers(len(pool)))]
        return format_function_call(function["name"], arguments)

    def _get_state(self) -> dict[str, Any]:
        return {
            "task_id": self.task.id,
            "db": self.store.db,
            "user_id": self.store.user_id,
            "messages": self.messages,
            "inbox": self._inbox,
            "steps": self.steps,
            "user_turns": self.user_turns,
            "violations": self.violations,
        }

    def _set_state(self, state: dict[str, Any]) -> None:
        self.task = load_retail_tasks()[state["task_id"]]
        self.store = self._lease_store() if self._store_lease is None else self.store
        self.store.db = state["db"]
        self.store.user_id = state["user_id"]
        self.messages = [tuple(m) for m in state["messages"]]
        self._inbox = state["inbox"]
        self.steps = state["steps"]
        self.user_turns = state["user_turns"]
        self.violations = state["violations"]

    def _lease_store(self) -> RetailStore:
        """Give back this env's store (if any) and lease a fresh one."""
        self._release_store()
        self._store_lease = self.store_pool.acquire(owner=f"CustomerServiceEnv@{id(self):x}")
        return self._store_lease.resource

    def _release_store(self) -> None:
        lease, self._store_lease = self._store_lease, None
        if lease is not None:
            lease.release()

    def close(self) -> None:
        """Give the store back, and close the pool if it is the env's own. Idempotent."""
        self._release_store()
        if self._owns_pool:
            self.store_pool.close()


class CustomerServiceAssistantEnv(SingleAgentView):
    """The assistant's side of `CustomerServiceEnv` as a single-agent env.

    Each `step` is one assistant action; the user's replies happen inside it. The reward is
    the assistant's (``1.0`` on success, in the last step), ``info`` the assistant's (see
    `SingleAgentView` for how the user's steps are folded in).

    Args:
        task_ids, max_steps, store_pool: As for `CustomerServiceEnv`.
        user_policy: Plays the user (its observation in, its message out); default: the
            scripted user. A policy's own state is not part of `get_state()`.
    """

    def __init__(
        self,
        task_ids: Sequence[str] | None = None,
        max_steps: int = 40,
        user_policy: Policy | None = None,
        store_pool: ResourcePool[RetailStore] | None = None,
    ) -> None:
        policies = {} if user_policy is None else {"user": user_policy}
        env = CustomerServiceEnv(task_ids, max_steps, store_pool)
        super().__init__(env, "assistant", policies)
