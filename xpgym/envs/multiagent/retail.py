"""A small retail store for the customer-service env: orders database, tools, policy, tasks.

Data (shipped in ``xpgym/data``, written for xpgym in the style of tau-bench's retail
domain):

* ``retail_db.json``: ``{"users", "products", "orders"}``, each keyed by id. A user has
  ``user_id``, ``name`` (``first_name``, ``last_name``), ``email``, ``address`` (``street``,
  ``zip``) and ``orders`` (order ids). A product has ``product_id``, ``name`` and
  ``variants`` keyed by item id, each ``{"item_id", "options", "price", "available"}``. An
  order has ``order_id``, ``user_id``, ``status`` (``"pending"``, ``"processed"``,
  ``"delivered"``, ``"cancelled"``, and after a change ``"return requested"`` or
  ``"exchange requested"``) and ``items`` (``{"item_id", "product_id", "name", "options",
  "price"}``).
* ``retail_tasks.json``: a list of tasks, each ``{"id", "instruction", "user_messages",
  "actions", "outputs"}`` (see `RetailTask`).

Tools (`TOOL_SCHEMAS`, JSON function schemas) and the policy they enforce (`POLICY`, the text
the assistant is given):

==================================  ============================================================
Tool                                Refused by policy (``status="refused"``) when
==================================  ============================================================
``find_user_id_by_email``           never; a match authenticates that user
``find_user_id_by_name_zip``        never; a match authenticates that user
``get_user_details``                no user is authenticated, or it is another user
``get_order_details``               no user is authenticated, or the order is another user's
``search_products``                 never (no authentication needed)
``get_product_details``             never (no authentication needed)
``cancel_pending_order``            as ``get_order_details``, or the order is not ``pending``
``return_delivered_order_items``    as ``get_order_details``, or the order is not ``delivered``
``exchange_delivered_order_items``  as ``return...``, or a new item is another product's
                                    variant or is not available
==================================  ============================================================

Calls that name a missing user, order, product or item, or that are inconsistent (an item
not in the order, repeated items, different list lengths, exchanging an item for itself)
fail with ``status="error"``; unknown tools and arguments that do not match the schema
(including a cancel reason other than ``"no longer needed"`` and ``"ordered by mistake"``)
are ``status="invalid"``. Only ``status="ok"`` calls change anything.

Changes: cancelling sets ``status="cancelled"`` and ``cancel_reason``; a return sets
``status="return requested"`` and ``return_items`` (the item ids); an exchange sets
``status="exchange requested"``, ``exchange_items`` and ``exchange_new_items``. An order
changes at most once: afterwards it is neither pending nor delivered.

Stores come from a `xpgym.core.resources.ResourcePool` (`retail_store_pool`): each episode
leases one, and a store given back is reset to the shipped database with nobody
authenticated, ready for the next episode.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Literal, NamedTuple

from xpgym.core.resources import ResourcePool
from xpgym.core.tools.calls import function_schema, validate_arguments

__all__ = [
    "CANCEL_REASONS",
    "POLICY",
    "TOOL_SCHEMAS",
    "RetailStore",
    "RetailTask",
    "ToolOutcome",
    "load_retail_db",
    "load_retail_tasks",
    "retail_store_pool",
]

CANCEL_REASONS = ("no longer needed", "ordered by mistake")

POLICY = (
    "You are the customer-service assistant of an online store. Follow this policy.\n"
    "- Authenticate the user before you look up or change any account or order: find their "
    "user id by email, or by first name, last name and zip code. Product information needs "
    "no authentication.\n"
    "- Help only the authenticated user, with their own account and orders.\n"
    "- A pending order can be cancelled, for the reason 'no longer needed' or 'ordered by "
    "mistake'. Processed, delivered and cancelled orders cannot be cancelled.\n"
    "- Items of a delivered order can be returned, or exchanged for an available variant of "
    "the same product (another size, colour, ...). Orders that are not delivered cannot be "
    "returned or exchanged, and an order can be changed only once.\n"
    "- Before you cancel, return or exchange, make sure you know exactly what the user "
    "wants.\n"
    "- Refuse requests the policy does not allow and explain why. The tools refuse them "
    "too, and every refused tool call counts against you."
)
"""The policy text shown to the assistant; `RetailStore` enforces what it can check."""

_STRING = {"type": "string"}
_IDS = {"type": "array", "items": _STRING}


def _schema(name: str, description: str, **properties: Mapping[str, Any]) -> dict[str, Any]:
    parameters = {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }
    return function_schema(name, description, parameters)


TOOL_SCHEMAS: list[dict[str, Any]] = [
    _schema(
        "find_user_id_by_email",
        "Find a user's id by email; authenticates that user.",
        email=_STRING,
    ),
    _schema(
        "find_user_id_by_name_zip",
        "Find a user's id by first name, last name and zip code; authenticates that user.",
        first_name=_STRING,
        last_name=_STRING,
        zip=_STRING,
    ),
    _schema(
        "get_user_details",
        "Get the authenticated user's name, email, address and order ids.",
        user_id=_STRING,
    ),
    _schema(
        "get_order_details",
        "Get an order of the authenticated user: status and items (item id, product, "
        "options, price).",
        order_id={"type": "string", "description": "e.g. '#W1001'"},
    ),
    _schema(
        "search_products",
        "List the products whose name contains the query (case-insensitive); an empty "
        "query lists every product.",
        query=_STRING,
    ),
    _schema(
        "get_product_details",
        "Get a product's variants: item id, options, price and availability.",
        product_id=_STRING,
    ),
    _schema(
        "cancel_pending_order",
        "Cancel a pending order of the authenticated user.",
        order_id=_STRING,
        reason={"type": "string", "enum": list(CANCEL_REASONS)},
    ),
    _schema(
        "return_delivered_order_items",
        "Request the return of some items of a delivered order of the authenticated user.",
        order_id=_STRING,
        item_ids=_IDS,
    ),
    _schema(
        "exchange_delivered_order_items",
        "Request the exchange of items of a delivered order for other variants of the same "
        "products; item_ids[i] is exchanged for new_item_ids[i].",
        order_id=_STRING,
        item_ids=_IDS,
        new_item_ids=_IDS,
    ),
]
"""The tools as JSON function schemas (chat templates' ``tools=``)."""

_PARAMETERS = {s["function"]["name"]: s["function"]["parameters"] for s in TOOL_SCHEMAS}

Status = Literal["ok", "error", "refused", "invalid"]


class ToolOutcome(NamedTuple):
    """What one tool call gave: the `text` for the assistant and its `status`.

    `status`: ``"ok"`` (done; `text` is the result, JSON or an id), ``"error"`` (a missing
    or inconsistent target), ``"refused"`` (the policy forbids it) or ``"invalid"`` (unknown
    tool, or arguments that do not match the schema).
    """

    text: str
    status: Status


class _RefusedError(Exception):
    """The policy forbids the call."""


class _FailedError(Exception):
    """The call names something missing or is inconsistent."""


@dataclass(frozen=True)
class RetailTask:
    """One customer-service task.

    Attributes:
        id: Unique name.
        instruction: The customer's situation and goal, for a user model.
        user_messages: What the scripted user says, one message per turn; the last one
            contains the stop token.
        actions: A correct assistant's tool calls, ``{"name", "arguments"}`` each, in order.
            Replaying them on the initial database gives the goal database; every one of
            them succeeds.
        outputs: Strings a correct assistant must say (matched case-insensitively, commas
            ignored).
        goal_db: The database after replaying `actions` on the shipped one (shared between
            envs: never modify it).
    """

    id: str
    instruction: str
    user_messages: tuple[str, ...]
    actions: tuple[Mapping[str, Any], ...]
    outputs: tuple[str, ...]
    goal_db: Mapping[str, Any] = field(repr=False, compare=False)


def _read_json(name: str) -> Any:
    with resources.files("xpgym.data").joinpath(name).open("r", encoding="utf-8") as file:
        return json.load(file)


@functools.lru_cache(maxsize=1)
def _shipped_db() -> dict[str, Any]:
    return _read_json("retail_db.json")


def load_retail_db() -> dict[str, Any]:
    """A fresh, private copy of the shipped database (``xpgym/data/retail_db.json``)."""
    return copy.deepcopy(_shipped_db())


@functools.lru_cache(maxsize=1)
def load_retail_tasks() -> dict[str, RetailTask]:
    """The shipped tasks (``xpgym/data/retail_tasks.json``) by id, in file order.

    Raises:
        ValueError: a task's reference action does not succeed on the shipped database.
    """
    tasks: dict[str, RetailTask] = {}
    for raw in _read_json("retail_tasks.json"):
        store = RetailStore(load_retail_db())
        for action in raw["actions"]:
            outcome = store.call(action["name"], action["arguments"])
            if outcome.status != "ok":
                raise ValueError(f"retail task {raw['id']!r}: action {action} gave {outcome}")
        tasks[raw["id"]] = RetailTask(
            id=raw["id"],
            instruction=raw["instruction"],
            user_messages=tuple(raw["user_messages"]),
            actions=tuple(raw["actions"]),
            outputs=tuple(raw["outputs"]),
            goal_db=store.db,
        )
    return tasks


class RetailStore:
    """One conversation's database and authenticated user, and the tools over them.

    Args:
        db: The database (see the module docstring); the store changes it in place.

    Attributes:
        db: The database. user_id: The authenticated user's id, or `None`.
    """

    def __init__(self, db: dict[str, Any]) -> None:
        self.db = db
        self.user_id: str | None = None

    def call(self, name: str, arguments: Mapping[str, Any]) -> ToolOutcome:
        """Run tool `name` with `arguments`; never raises for a bad call (see `ToolOutcome`)."""
        parameters = _PARAMETERS.get(name)
        if parameters is None:
            return ToolOutcome(
                f"Error: unknown tool {name!r:.60}; the tools are {', '.join(_PARAMETERS)}.",
                "invalid",
            )
        problem = validate_arguments(arguments, parameters)
        if problem is not None:
            return ToolOutcome(f"Error: {name}: {problem}.", "invalid")
        try:
            result = getattr(self, f"_{name}")(**arguments)
        except _RefusedError as refusal:
            return ToolOutcome(f"Refused by policy: {refusal}", "refused")
        except _FailedError as failure:
            return ToolOutcome(f"Error: {failure}", "error")
        return ToolOutcome(result if isinstance(result, str) else json.dumps(result), "ok")

    def restock(self) -> None:
        """Back to a fresh copy of the shipped database, nobody authenticated (the pool's
        reset of a returned store)."""
        self.db = load_retail_db()
        self.user_id = None

    # ---------------------------------------------------------------- checks

    def _authenticated(self) -> str:
        if self.user_id is None:
            raise _RefusedError(
                "authenticate the user first (find_user_id_by_email or find_user_id_by_name_zip)."
            )
        return self.user_id

    def _own_order(self, order_id: str) -> dict[str, Any]:
        user_id = self._authenticated()
        order = self.db["orders"].get(order_id)
        if order is None:
            raise _FailedError(f"order {order_id!r:.40} not found.")
        if order["user_id"] != user_id:
            raise _RefusedError(f"order {order_id} does not belong to the authenticated user.")
        return order

    def _order_with_status(self, order_id: str, status: str, what: str) -> dict[str, Any]:
        order = self._own_order(order_id)
        if order["status"] != status:
            raise _RefusedError(
                f"only {status} orders can be {what}; order {order_id} is {order['status']}."
            )
        return order

    @staticmethod
    def _items(order: Mapping[str, Any], item_ids: Sequence[str]) -> list[dict[str, Any]]:
        if not item_ids:
            raise _FailedError("item_ids is empty; name at least one item.")
        if len(set(item_ids)) != len(item_ids):
            raise _FailedError("item_ids repeats an item.")
        by_id = {item["item_id"]: item for item in order["items"]}
        missing = [i for i in item_ids if i not in by_id]
        if missing:
            raise _FailedError(f"items {missing!r:.80} are not in order {order['order_id']}.")
        return [by_id[i] for i in item_ids]

    def _login(self, user: Mapping[str, Any] | None, how: str) -> str:
        if user is None:
            raise _FailedError(f"no user found with {how}.")
        self.user_id = user["user_id"]
        return self.user_id

    # ---------------------------------------------------------------- tools

    def _find_user_id_by_email(self, email: str) -> str:
        wanted = email.strip().lower()
        user = next((u for u in self.db["users"].values() if u["email"] == wanted), None)
        return self._login(user, f"email {email!r:.60}")

    def _find_user_id_by_name_zip(self, first_name: str, last_name: str, zip: str) -> str:
        wanted = (first_name.strip().lower(), last_name.strip().lower(), zip.strip())
        user = next(
            (
                u
                for u in self.db["users"].values()
                if (
                    u["name"]["first_name"].lower(),
                    u["name"]["last_name"].lower(),
                    u["address"]["zip"],
                )
                == wanted
            ),
            None,
        )
        return self._login(user, "that name and zip code")

    def _get_user_details(self, user_id: str) -> dict[str, Any]:
        if user_id != self._authenticated():
            raise _RefusedError(f"user {user_id!r:.60} is not the authenticated user.")
        return self.db["users"][user_id]

    def _get_order_details(self, order_id: str) -> dict[str, Any]:
        return self._own_order(order_id)

    def _search_products(self, query: str) -> list[dict[str, str]]:
        wanted = query.strip().lower()
        return [
            {"product_id": p["product_id"], "name": p["name"]}
            for p in self.db["products"].values()
            if wanted in p["name"].lower()
        ]

    def _get_product_details(self, product_id: str) -> dict[str, Any]:
        product = self.db["products"].get(product_id)
        if product is None:
            raise _FailedError(f"product {product_id!r:.40} not found.")
        return product

    def _cancel_pending_order(self, order_id: str, reason: str) -> dict[str, Any]:
        order = self._order_with_status(order_id, "pending", "cancelled")
        order["status"] = "cancelled"
        order["cancel_reason"] = reason
        return order

    def _return_delivered_order_items(self, order_id: str, item_ids: list[str]) -> dict[str, Any]:
        order = self._order_with_status(order_id, "delivered", "returned")
        self._items(order, item_ids)
        order["status"] = "return requested"
        order["return_items"] = list(item_ids)
        return order

    def _exchange_delivered_order_items(
        self, order_id: str, item_ids: list[str], new_item_ids: list[str]
    ) -> dict[str, Any]:
        order = self._order_with_status(order_id, "delivered", "exchanged")
        items = self._items(order, item_ids)
        if len(new_item_ids) != len(item_ids):
            raise _FailedError("item_ids and new_item_ids must have the same length.")
        for item, new_id in zip(items, new_item_ids, strict=True):
            variants = self.db["products"][item["product_id"]]["variants"]
            if new_id == item["item_id"]:
                raise _FailedError(f"item {new_id} cannot be exchanged for itself.")
            if new_id not in variants:
                if not any(new_id in p["variants"] for p in self.db["products"].values()):
                    raise _FailedError(f"item {new_id!r:.40} not found.")
                raise _RefusedError(
                    f"item {new_id} is not a variant of {item['name']} (product "
                    f"{item['product_id']}); exchanges keep the product."
                )
            if not variants[new_id]["available"]:
                raise _RefusedError(f"item {new_id} is not available.")
        order["status"] = "exchange requested"
        order["exchange_items"] = list(item_ids)
        order["exchange_new_items"] = list(new_item_ids)
        return order


def retail_store_pool(
    size: int = 1, *, name: str = "retail-store", **options: Any
) -> ResourcePool[RetailStore]:
    """A pool of up to `size` stores, each made with a fresh copy of the shipped database and
    restocked (`RetailStore.restock`) when given back.

    Args:
        size: The most stores at once: the episodes that can run at once on this pool.
        name: The pool's name (logs, metrics).
        options: More `ResourcePool` options (`lease_timeout_s`, `acquire_timeout_s`, ...).
    """
    return ResourcePool(
        lambda: RetailStore(load_retail_db()),
        size,
        reset=RetailStore.restock,
        name=name,
        **options,
    )
