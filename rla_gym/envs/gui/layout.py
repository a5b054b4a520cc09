"""The fixed vocabulary, screen slots and command ids of RLA-GUI-v0.

Shared by the env and its screenshot: every task uses the same token layout and the
same ``Discrete`` command set, so a flatten-MLP sees one element kind in one place.
"""

from __future__ import annotations

TOP_WORDS = ("file", "edit", "view", "insert", "format", "tools", "window", "help")
SUB_WORDS = ("advanced", "customize", "document", "project", "workspace", "system", "extras", "manage")
DIALOG_WORDS = (
    "preferences", "options", "settings", "fonts", "layout", "display", "editor", "export",
    "print", "network", "account", "privacy", "appearance", "keyboard", "language", "plugins",
)  # fmt: skip
COMMAND_WORDS = (
    "undo", "redo", "cut", "copy", "paste", "find", "replace", "zoom",
    "refresh", "close", "new", "rename", "duplicate", "delete", "about", "select",
)  # fmt: skip
TAB_WORDS = ("general", "behavior", "colors", "files", "keys", "spelling", "saving", "startup")
LABEL_A = ("font", "line", "indent", "auto", "word", "page", "grid", "spell", "cursor", "margin",
           "scroll", "status", "title", "toolbar", "sidebar")  # fmt: skip
LABEL_B = ("size", "width", "numbers", "save", "wrap", "guides", "color", "style", "limit", "spacing",
           "blink", "height", "mode", "hints", "count")  # fmt: skip
NUMBERS = ("2", "4", "8", "10", "12", "14", "16", "24")
WORDS = ("dark", "light", "mono", "serif")
ROLES = ("menu", "submenu", "command", "opener", "tab", "checkbox", "field", "button")
FLAGS = ("open", "active", "focused", "disabled")
VOCAB = (
    ("<pad>", "<none>", "<unknown>", "set", "check", "uncheck", "on", "off", "more", "main", "ok", "cancel")
    + ROLES + FLAGS + NUMBERS + WORDS + TOP_WORDS + SUB_WORDS + DIALOG_WORDS + COMMAND_WORDS
    + TAB_WORDS + LABEL_A + LABEL_B
)  # fmt: skip
TOKEN_ID = {w: i for i, w in enumerate(VOCAB)}
assert len(TOKEN_ID) == len(VOCAB), "vocabulary words must be distinct"
NONE, UNKNOWN, ON, OFF, MORE = (
    TOKEN_ID["<none>"],
    TOKEN_ID["<unknown>"],
    TOKEN_ID["on"],
    TOKEN_ID["off"],
    TOKEN_ID["more"],
)
MENU, SUBMENU, COMMAND, OPENER, TAB, CHECKBOX, FIELD, BUTTON = (TOKEN_ID[r] for r in ROLES)
OPEN, ACTIVE, FOCUSED, DISABLED = (TOKEN_ID[f] for f in FLAGS)
VALUE_TOKENS = tuple(TOKEN_ID[v] for v in NUMBERS + WORDS)  # what "type v" writes

# Screen slots (fixed positions, so a flatten-MLP sees the same element kind in the same place)
MENUBAR_SLOTS, LEVELS, ITEMS, TAB_SLOTS, ROWS = 6, 3, 6, 4, 5
LEVEL_ = MENUBAR_SLOTS
TAB_ = LEVEL_ + LEVELS * ITEMS
ROW_ = TAB_ + TAB_SLOTS
OK_ = ROW_ + ROWS
CANCEL_ = OK_ + 1
TYPE_ = CANCEL_ + 1
ENTER_ = TYPE_ + len(VALUE_TOKENS)
ESCAPE_, NEXT_TAB_, SCROLL_UP_, SCROLL_DOWN_, WAIT_ = (
    ENTER_ + 1,
    ENTER_ + 2,
    ENTER_ + 3,
    ENTER_ + 4,
    ENTER_ + 5,
)
ACTION_NAMES = (
    tuple(f"click {k}" for k in range(CANCEL_ + 1))
    + tuple(f"type {v}" for v in NUMBERS + WORDS)
    + ("press enter", "press escape", "press tab", "scroll up", "scroll down", "wait")
)
MAX_GOALS, GOAL_TOKENS, SLOT_TOKENS = 3, 9, 5
TOKEN_LENGTH = MAX_GOALS * GOAL_TOKENS + 6 + (CANCEL_ + 1) * SLOT_TOKENS
KIND_CHECK, KIND_NUMBER, KIND_WORD = 0, 1, 2
NODE_TOP, NODE_SUB, NODE_COMMAND, NODE_OPENER = 0, 1, 2, 3
NODE_ROLE = (MENU, SUBMENU, COMMAND, OPENER)
