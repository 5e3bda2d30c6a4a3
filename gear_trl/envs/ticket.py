"""TicketAPI: BFCL's support-ticket system (log in, create, read, edit, resolve and close tickets).

Written from BFCL's function documentation (`multi_turn_func_doc/ticket_api.json`). State, in BFCL's
`initial_config` format:

    {"ticket_queue": [{"id", "title", "description", "status", "priority", "created_by", ...}, ...],
     "ticket_counter": int, "current_user": str | None}

The system keeps no passwords: `ticket_login` accepts any non-empty username and password. Creating a ticket and
listing one's own tickets need a logged-in user; reading, editing, resolving and closing a ticket by id do not
(BFCL's tasks do these without logging in). A new ticket gets the id `ticket_counter` (skipping ids in use), status
"Open", and the counter moves past it.
"""

from typing import Any

from .base import APIEnvironment, ToolError

DEFAULT_STATE: dict[str, Any] = {"ticket_queue": [], "ticket_counter": 1, "current_user": None}
"""BFCL's default TicketAPI scenario (data from the bfcl-eval package, Apache-2.0), used for keys a task omits."""

EDITABLE_FIELDS = ("title", "description", "status", "priority")


def _check_priority(priority: Any) -> int:
    if isinstance(priority, bool) or not isinstance(priority, int) or not 1 <= priority <= 5:
        raise ToolError(f"Invalid priority {priority!r}: it must be an integer from 1 to 5.")
    return priority


class TicketAPI(APIEnvironment):
    """A support-ticket queue."""

    class_name = "TicketAPI"
    default_state = DEFAULT_STATE

    def _ticket(self, ticket_id: Any) -> dict[str, Any]:
        if isinstance(ticket_id, str) and ticket_id.isdigit():
            ticket_id = int(ticket_id)
        if not isinstance(ticket_id, bool):
            for ticket in self._state["ticket_queue"]:
                if ticket.get("id") == ticket_id:
                    return ticket
        raise ToolError(f"Ticket with ID {ticket_id!r} not found.")

    def _require_login(self) -> str:
        if self._state["current_user"] is None:
            raise ToolError("User not authenticated. Please log in with ticket_login first.")
        return self._state["current_user"]

    def ticket_login(self, username: str, password: str) -> str:
        """Authenticate a user for ticket system.

        Args:
            username: Username of the user.
            password: Password of the user.

        Returns:
            JSON object {"success": bool}.
        """
        if not (isinstance(username, str) and username and isinstance(password, str) and password):
            return {"success": False}
        self._state["current_user"] = username
        return {"success": True}

    def ticket_get_login_status(self) -> str:
        """Get the login status of the currently authenticated user.

        Returns:
            JSON object {"login_status": bool}.
        """
        return {"login_status": self._state["current_user"] is not None}

    def logout(self) -> str:
        """Log out the current user.

        Returns:
            JSON object {"success": bool}: false if nobody was logged in.
        """
        if self._state["current_user"] is None:
            return {"success": False}
        self._state["current_user"] = None
        return {"success": True}

    def create_ticket(self, title: str, description: str = "", priority: int = 1) -> str:
        """Create a ticket in the system and queue it.

        Args:
            title: Title of the ticket.
            description: Description of the ticket. Defaults to an empty string.
            priority: Priority of the ticket, from 1 to 5. Defaults to 1. 5 is the highest priority.

        Returns:
            JSON object of the ticket {"id", "title", "description", "status", "priority", "created_by"}.
        """
        user = self._require_login()
        if not isinstance(title, str) or not isinstance(description, str):
            raise ToolError("title and description must be strings.")
        _check_priority(priority)
        taken = {ticket.get("id") for ticket in self._state["ticket_queue"]}
        ticket_id = self._state["ticket_counter"]
        while ticket_id in taken:
            ticket_id += 1
        ticket = {
            "id": ticket_id,
            "title": title,
            "description": description,
            "status": "Open",
            "priority": priority,
            "created_by": user,
        }
        self._state["ticket_queue"].append(ticket)
        self._state["ticket_counter"] = ticket_id + 1
        return ticket

    def get_ticket(self, ticket_id: int) -> str:
        """Get a specific ticket by its ID.

        Args:
            ticket_id: ID of the ticket to retrieve.

        Returns:
            JSON object of the ticket {"id", "title", "description", "status", "priority", "created_by"}.
        """
        return self._ticket(ticket_id)

    def get_user_tickets(self, status: str | None = None) -> str:
        """Get all tickets created by the current user, optionally filtered by status.

        Args:
            status: Status to filter tickets by (case-insensitive). If None, return all tickets.

        Returns:
            JSON array of the user's tickets.
        """
        user = self._require_login()
        wanted = None if status is None else str(status).lower()
        return [
            ticket
            for ticket in self._state["ticket_queue"]
            if ticket.get("created_by") == user and (wanted is None or str(ticket.get("status", "")).lower() == wanted)
        ]

    def edit_ticket(self, ticket_id: int, updates: dict) -> str:
        """Modify the details of an existing ticket.

        Args:
            ticket_id: ID of the ticket to be changed.
            updates: Dictionary containing the fields to be updated, any of "title" (str), "description" (str),
                "status" (str) and "priority" (int from 1 to 5).

        Returns:
            JSON object {"status": str} describing the update, or an error (then nothing is changed).
        """
        ticket = self._ticket(ticket_id)
        if not isinstance(updates, dict) or not updates:
            raise ToolError(f"updates must be a non-empty object, got {updates!r}.")
        unknown = sorted(set(updates) - set(EDITABLE_FIELDS))
        if unknown:
            raise ToolError(f"Invalid fields for update: {unknown}; editable fields are {list(EDITABLE_FIELDS)}.")
        if "priority" in updates:
            _check_priority(updates["priority"])
        for field in ("title", "description", "status"):
            if field in updates and not isinstance(updates[field], str):
                raise ToolError(f"{field} must be a string, got {updates[field]!r}.")
        ticket.update(updates)
        return {"status": f"Ticket {ticket_id} has been updated successfully."}

    def resolve_ticket(self, ticket_id: int, resolution: str) -> str:
        """Resolve a ticket with a resolution.

        Args:
            ticket_id: ID of the ticket to be resolved.
            resolution: Resolution details for the ticket.

        Returns:
            JSON object {"status": str}.
        """
        ticket = self._ticket(ticket_id)
        if not isinstance(resolution, str):
            raise ToolError(f"resolution must be a string, got {resolution!r}.")
        ticket["status"] = "Resolved"
        ticket["resolution"] = resolution
        return {"status": f"Ticket {ticket_id} has been resolved successfully."}

    def close_ticket(self, ticket_id: int) -> str:
        """Close a ticket.

        Args:
            ticket_id: ID of the ticket to be closed.

        Returns:
            JSON object {"status": str}, or an error if it is already closed.
        """
        ticket = self._ticket(ticket_id)
        if str(ticket.get("status", "")).lower() == "closed":
            raise ToolError(f"Ticket {ticket_id} is already closed.")
        ticket["status"] = "Closed"
        return {"status": f"Ticket {ticket_id} has been closed successfully."}
