"""MessageAPI: BFCL's workspace messaging API (log in, add contacts, send, delete and search messages).

Written from BFCL's function documentation (`multi_turn_func_doc/message_api.json`). State, in BFCL's
`initial_config` format:

    {"user_count": int, "user_map": {user name: user id}, "current_user": user id | None,
     "inbox": [{receiver id: message or [messages]}, ...], "message_count": int}

`inbox` is the log of messages sent from this workspace (what `view_messages_sent` shows); BFCL's tasks store a
message as a string or a list of strings, and both are read. `add_contact` gives the new user the id
`USR<user_count + 1>` (zero-padded to 3 digits, skipping ids in use) and increments `user_count`. Sending,
deleting, viewing, searching and statistics need a logged-in user (`message_login`, or `current_user` in the
configuration).
"""

from typing import Any

from .base import APIEnvironment, ToolError

DEFAULT_STATE: dict[str, Any] = {
    "user_count": 4,
    "user_map": {"Alice": "USR001", "Bob": "USR002", "Catherine": "USR003", "Daniel": "USR004"},
    "inbox": [
        {"USR002": "My name is Alice. I want to connect."},
        {"USR003": "Could you upload the file?"},
        {"USR004": "Could you upload the file?"},
    ],
    "message_count": 3,
    "current_user": None,
}
"""BFCL's default MessageAPI scenario (data from the bfcl-eval package, Apache-2.0), used for keys a task omits."""


def _messages(value: Any) -> list[str]:
    """The messages of one inbox value: a string, or a list of strings (other shapes hold none)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [m for m in value if isinstance(m, str)]
    return []


class MessageAPI(APIEnvironment):
    """A workspace messaging service: users, contacts and sent messages."""

    class_name = "MessageAPI"
    default_state = DEFAULT_STATE

    def _require_login(self) -> str:
        if self._state["current_user"] is None:
            raise ToolError("No user is currently logged in. Log in with message_login first.")
        return self._state["current_user"]

    def _sent(self) -> list[tuple[str, str]]:
        """(receiver id, message) of every message in the inbox, oldest first."""
        return [(rid, m) for entry in self._state["inbox"] for rid, value in entry.items() for m in _messages(value)]

    def list_users(self) -> str:
        """List all users in the workspace.

        Returns:
            JSON object {"user_list": list of user names}.
        """
        return {"user_list": list(self._state["user_map"])}

    def get_user_id(self, user: str) -> str:
        """Get user ID from user name.

        Args:
            user: User name of the user.

        Returns:
            JSON object {"user_id": str}, or an error if the user does not exist.
        """
        if user not in self._state["user_map"]:
            raise ToolError(f"User '{user}' not found in the workspace.")
        return {"user_id": self._state["user_map"][user]}

    def message_login(self, user_id: str) -> str:
        """Log in a user with the given user ID to message application.

        Args:
            user_id: User ID of the user to log in.

        Returns:
            JSON object {"login_status": bool, "message": str}.
        """
        if user_id not in self._state["user_map"].values():
            return {"login_status": False, "message": f"User ID '{user_id}' not found."}
        self._state["current_user"] = user_id
        return {"login_status": True, "message": f"User '{user_id}' logged in successfully."}

    def message_get_login_status(self) -> str:
        """Get the login status of the current user.

        Returns:
            JSON object {"login_status": bool}.
        """
        return {"login_status": self._state["current_user"] is not None}

    def add_contact(self, user_name: str) -> str:
        """Add a contact to the workspace.

        Args:
            user_name: User name of contact to be added.

        Returns:
            JSON object {"added_status": bool, "user_id": str, "message": str}.
        """
        if not isinstance(user_name, str) or not user_name:
            raise ToolError(f"user_name must be a non-empty string, got {user_name!r}.")
        user_map = self._state["user_map"]
        if user_name in user_map:
            return {
                "added_status": False,
                "user_id": user_map[user_name],
                "message": f"User '{user_name}' already exists.",
            }
        taken = set(user_map.values())
        count = self._state["user_count"] + 1
        while f"USR{count:03d}" in taken:
            count += 1
        user_id = f"USR{count:03d}"
        user_map[user_name] = user_id
        self._state["user_count"] = count
        return {"added_status": True, "user_id": user_id, "message": f"Contact '{user_name}' added successfully."}

    def send_message(self, receiver_id: str, message: str) -> str:
        """Send a message to a user.

        Args:
            receiver_id: User ID of the user to send the message to.
            message: Message to be sent.

        Returns:
            JSON object {"sent_status": bool, "message_id": int, "message": str}.
        """
        self._require_login()
        if receiver_id not in self._state["user_map"].values():
            raise ToolError(f"Receiver ID '{receiver_id}' not found.")
        if not isinstance(message, str):
            raise ToolError(f"message must be a string, got {message!r}.")
        self._state["inbox"].append({receiver_id: message})
        self._state["message_count"] += 1
        return {
            "sent_status": True,
            "message_id": self._state["message_count"],
            "message": f"Message sent to '{receiver_id}' successfully.",
        }

    def delete_message(self, receiver_id: str) -> str:
        """Delete the latest message sent to a receiver.

        Args:
            receiver_id: User ID of the receiver of the message to delete.

        Returns:
            JSON object {"deleted_status": bool, "receiver_id": str, "message": str}.
        """
        self._require_login()
        inbox = self._state["inbox"]
        for index in range(len(inbox) - 1, -1, -1):
            entry = inbox[index]
            if receiver_id in entry and _messages(entry[receiver_id]):
                value = entry[receiver_id]
                if isinstance(value, list) and len(_messages(value)) > 1:
                    last = max(i for i, m in enumerate(value) if isinstance(m, str))
                    del value[last]
                else:
                    del entry[receiver_id]
                    if not entry:
                        del inbox[index]
                return {
                    "deleted_status": True,
                    "receiver_id": receiver_id,
                    "message": f"Latest message sent to '{receiver_id}' deleted successfully.",
                }
        return {
            "deleted_status": False,
            "receiver_id": receiver_id,
            "message": f"No message sent to '{receiver_id}' was found.",
        }

    def view_messages_sent(self) -> str:
        """View all historical messages sent by the current user.

        Returns:
            JSON object {"messages": {receiver id: [messages]}}, e.g. {"USR001": ["Hello"], "USR002": ["World"]}.
        """
        self._require_login()
        grouped: dict[str, list[str]] = {}
        for receiver_id, message in self._sent():
            grouped.setdefault(receiver_id, []).append(message)
        return {"messages": grouped}

    def search_messages(self, keyword: str) -> str:
        """Search for messages containing a specific keyword (case-insensitive).

        Args:
            keyword: The keyword to search for in messages.

        Returns:
            JSON object {"results": list of {"receiver_id": str, "message": str}}.
        """
        self._require_login()
        needle = str(keyword).lower()
        return {
            "results": [
                {"receiver_id": rid, "message": message} for rid, message in self._sent() if needle in message.lower()
            ]
        }

    def get_message_stats(self) -> str:
        """Get statistics about messages for the current user.

        Returns:
            JSON object {"stats": {"received_count": int, "total_contacts": int}}: messages addressed to the current
            user, and the number of distinct users messages were sent to.
        """
        user = self._require_login()
        sent = self._sent()
        received = sum(1 for rid, _ in sent if rid == user)
        contacts = {rid for rid, _ in sent if rid != user}
        return {"stats": {"received_count": received, "total_contacts": len(contacts)}}
