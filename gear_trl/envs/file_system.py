"""GorillaFileSystem: BFCL's in-memory file system (ls, cd, mkdir, touch, echo, cat, mv, cp, rm, ...).

Written from BFCL's function documentation (`multi_turn_func_doc/gorilla_file_system.json`). State, in BFCL's
`initial_config` format plus the working directory:

    {"root": {name: node, ...}, "current_directory": "/alex/workspace"}
    node = {"type": "directory", "contents": {name: node, ...}} | {"type": "file", "content": str}

`root` holds the top-level entries of the file system root `/`. A configuration without `current_directory` starts
in the first top-level directory (BFCL's tasks are written so: `{"root": {"alex": ...}}` starts in `/alex`).
Entries keep insertion order, which is the "system order" `ls` shows; a renamed entry moves to the end.
All operations are local to the working directory, as the documentation says: names, not paths (`cd` moves one
level; `find` is the only tool that takes a path). Read-only tools (`sort`, `tail`, `diff`, ...) never change state;
`echo` to a file replaces its content (creating the file when missing); `touch` fails on an existing name.
"""

import copy
from typing import Any, ClassVar

from .base import APIEnvironment, ToolError


def _lines(content: str) -> list[str]:
    return content.splitlines()


class GorillaFileSystem(APIEnvironment):
    """A simple in-memory file system: navigate directories, create, read, write, move and compare files."""

    class_name = "GorillaFileSystem"
    default_state: ClassVar[dict[str, Any]] = {"root": {}, "current_directory": None}
    unscored_keys: ClassVar[tuple[str, ...]] = ("current_directory",)

    # ---- state helpers -------------------------------------------------------------------------------------------

    def _normalize(self, state: dict[str, Any]) -> dict[str, Any]:
        state["root"] = {name: self._normalize_node(node) for name, node in (state["root"] or {}).items()}
        cwd = state.get("current_directory")
        if cwd is None:
            first_dir = next((name for name, node in state["root"].items() if node["type"] == "directory"), None)
            cwd = "/" if first_dir is None else "/" + first_dir
        state["current_directory"] = cwd
        self._state = state
        self._directory(self._cwd_parts())  # a stored working directory must exist
        return state

    def _normalize_node(self, node: dict[str, Any]) -> dict[str, Any]:
        if node.get("type") == "directory":
            contents = node.get("contents") or {}
            return {"type": "directory", "contents": {k: self._normalize_node(v) for k, v in contents.items()}}
        return {"type": "file", "content": str(node.get("content", ""))}

    def _cwd_parts(self) -> list[str]:
        return [part for part in self._state["current_directory"].split("/") if part]

    def _directory(self, parts: list[str]) -> dict[str, Any]:
        """The `contents` dict of the directory at `parts` (names from the root)."""
        contents = self._state["root"]
        for part in parts:
            node = contents.get(part)
            if node is None or node["type"] != "directory":
                raise ToolError(f"No such directory: '/{'/'.join(parts)}'.")
            contents = node["contents"]
        return contents

    def _here(self) -> dict[str, Any]:
        return self._directory(self._cwd_parts())

    @staticmethod
    def _check_name(name: Any, what: str = "name") -> str:
        if not isinstance(name, str) or not name:
            raise ToolError(f"Invalid {what}: {name!r}.")
        if "/" in name:
            raise ToolError(f"Invalid {what} '{name}': paths are not allowed, only names in the current directory.")
        if name in (".", ".."):
            raise ToolError(f"Invalid {what} '{name}'.")
        return name

    def _file(self, file_name: str) -> dict[str, Any]:
        self._check_name(file_name, "file name")
        node = self._here().get(file_name)
        if node is None:
            raise ToolError(f"No such file: '{file_name}'.")
        if node["type"] != "file":
            raise ToolError(f"'{file_name}' is a directory, not a file.")
        return node

    def _resolve(self, path: str) -> list[str]:
        """Names from the root of a path relative to the working directory (or absolute with a leading `/`)."""
        parts = [] if path.startswith("/") else self._cwd_parts()
        for part in path.split("/"):
            if part in ("", "."):
                continue
            if part == "..":
                if not parts:
                    raise ToolError(f"Path '{path}' goes above the root directory.")
                parts = parts[:-1]
            else:
                parts = parts + [part]
        self._directory(parts)
        return parts

    def _size(self, contents: dict[str, Any]) -> int:
        total = 0
        for node in contents.values():
            if node["type"] == "file":
                total += len(node["content"].encode("utf-8"))
            else:
                total += self._size(node["contents"])
        return total

    def _transfer(self, source: str, destination: str, keep_source: bool) -> str:
        """Shared logic of `mv` (keep_source=False) and `cp` (keep_source=True)."""
        verb = "copied" if keep_source else "moved"
        here = self._here()
        self._check_name(source, "source")
        self._check_name(destination, "destination")
        if source not in here:
            raise ToolError(f"No such file or directory: '{source}'.")
        if source == destination:
            raise ToolError(f"Source and destination are the same: '{source}'.")
        node = here[source]
        target = here.get(destination)
        if target is not None and target["type"] == "directory":
            if source in target["contents"]:
                raise ToolError(f"'{destination}/{source}' already exists.")
            target["contents"][source] = copy.deepcopy(node)
            result = f"'{source}' {verb} into directory '{destination}'."
        elif target is not None:
            raise ToolError(f"'{destination}' already exists; it will not be overwritten.")
        else:
            here[destination] = copy.deepcopy(node)
            result = f"'{source}' {verb} to '{destination}'."
        if not keep_source:
            del here[source]
        return result

    # ---- tools ---------------------------------------------------------------------------------------------------

    def pwd(self) -> str:
        """Return the current working directory path.

        Returns:
            JSON object {"current_working_directory": str}.
        """
        return {"current_working_directory": self._state["current_directory"]}

    def ls(self, a: bool = False) -> str:
        """List the contents of the current directory.

        Args:
            a: Show hidden files and directories (names starting with '.'). Defaults to False.

        Returns:
            JSON object {"current_directory_content": list of names, in system order}.
        """
        names = [name for name in self._here() if a or not name.startswith(".")]
        return {"current_directory_content": names}

    def cd(self, folder: str) -> str:
        """Change the current working directory to the specified folder.

        Args:
            folder: The folder of the directory to change to: a directory in the current directory, or '..' for
                the parent. You can only change one folder level at a time.

        Returns:
            JSON object {"current_working_directory": str} with the new path, or an error.
        """
        parts = self._cwd_parts()
        if folder == "..":
            if not parts:
                raise ToolError("cd: already at the root directory.")
            parts = parts[:-1]
        elif folder != ".":
            self._check_name(folder, "folder")
            node = self._here().get(folder)
            if node is None:
                raise ToolError(f"cd: '{folder}': No such directory. You can only change one folder level at a time.")
            if node["type"] != "directory":
                raise ToolError(f"cd: '{folder}': Not a directory.")
            parts = parts + [folder]
        self._state["current_directory"] = "/" + "/".join(parts)
        return {"current_working_directory": self._state["current_directory"]}

    def mkdir(self, dir_name: str) -> str:
        """Create a new directory in the current directory.

        Args:
            dir_name: The name of the new directory at current directory. You can only create directory at
                current directory.

        Returns:
            An empty JSON object on success, or an error.
        """
        here = self._here()
        self._check_name(dir_name, "directory name")
        if dir_name in here:
            raise ToolError(f"mkdir: cannot create directory '{dir_name}': File exists.")
        here[dir_name] = {"type": "directory", "contents": {}}
        return {}

    def touch(self, file_name: str) -> str:
        """Create a new file of any extension in the current directory.

        Args:
            file_name: The name of the new file in the current directory. file_name is local to the current
                directory and does not allow path.

        Returns:
            An empty JSON object on success, or an error if the name already exists.
        """
        here = self._here()
        self._check_name(file_name, "file name")
        if file_name in here:
            raise ToolError(f"touch: '{file_name}' already exists.")
        here[file_name] = {"type": "file", "content": ""}
        return {}

    def echo(self, content: str, file_name: str | None = None) -> str:
        """Write content to a file at current directory or display it in the terminal.

        Args:
            content: The content to write or display.
            file_name: The name of the file at current directory to write the content to (its previous content is
                replaced; a missing file is created). Defaults to None, which displays the content instead.

        Returns:
            JSON object {"terminal_output": str or null}: the content if no file name is provided, null if written
            to a file.
        """
        if not isinstance(content, str):
            raise ToolError(f"content must be a string, got {type(content).__name__}.")
        if file_name is None:
            return {"terminal_output": content}
        here = self._here()
        self._check_name(file_name, "file name")
        node = here.get(file_name)
        if node is not None and node["type"] != "file":
            raise ToolError(f"echo: '{file_name}' is a directory.")
        here[file_name] = {"type": "file", "content": content}
        return {"terminal_output": None}

    def cat(self, file_name: str) -> str:
        """Display the contents of a file of any extension from current directory.

        Args:
            file_name: The name of the file from current directory to display. No path is allowed.

        Returns:
            JSON object {"file_content": str}.
        """
        return {"file_content": self._file(file_name)["content"]}

    def find(self, path: str = ".", name: str | None = None) -> str:
        """Find any file or directories under specific path that contain name in its file name.

        Searches recursively through all subdirectories of the given path. If no name is provided, it returns all
        files and directories in the specified path and its subdirectories.

        Args:
            path: The directory path to start the search, relative to the current directory. Defaults to the
                current directory (".").
            name: The name of the file or directory to search for (substring match). If None, all items are
                returned.

        Returns:
            JSON object {"matches": list of matching paths, each starting with the given path}.
        """
        if not isinstance(path, str):
            raise ToolError(f"path must be a string, got {type(path).__name__}.")
        start = self._directory(self._resolve(path))
        prefix = path.rstrip("/") or "/"
        matches: list[str] = []

        def walk(contents: dict[str, Any], base: str) -> None:
            for entry, node in contents.items():
                entry_path = f"{base}/{entry}" if base != "/" else f"/{entry}"
                if name is None or name in entry:
                    matches.append(entry_path)
                if node["type"] == "directory":
                    walk(node["contents"], entry_path)

        walk(start, prefix)
        return {"matches": matches}

    def grep(self, file_name: str, pattern: str) -> str:
        """Search for lines in a file of any extension at current directory that contain the specified pattern.

        Args:
            file_name: The name of the file to search. No path is allowed and you can only perform on file at
                local directory.
            pattern: The pattern to search for (plain substring, case-sensitive).

        Returns:
            JSON object {"matching_lines": list of lines}.
        """
        content = self._file(file_name)["content"]
        return {"matching_lines": [line for line in _lines(content) if str(pattern) in line]}

    def wc(self, file_name: str, mode: str = "l") -> str:
        """Count the number of lines, words, and characters in a file of any extension from current directory.

        Args:
            file_name: Name of the file of current directory to perform wc operation on.
            mode: Mode of operation ('l' for lines, 'w' for words, 'c' for characters). Defaults to 'l'.

        Returns:
            JSON object {"count": int, "type": "lines" | "words" | "characters"}.
        """
        content = self._file(file_name)["content"]
        counts = {
            "l": (len(_lines(content)), "lines"),
            "w": (len(content.split()), "words"),
            "c": (len(content), "characters"),
        }
        if mode not in counts:
            raise ToolError(f"wc: invalid mode '{mode}'; use 'l', 'w' or 'c'.")
        count, unit = counts[mode]
        return {"count": count, "type": unit}

    def sort(self, file_name: str) -> str:
        """Sort the contents of a file line by line (the file itself is not changed).

        Args:
            file_name: The name of the file appeared at current directory to sort.

        Returns:
            JSON object {"sorted_content": str}: the lines in ascending order, joined by newlines.
        """
        content = self._file(file_name)["content"]
        return {"sorted_content": "\n".join(sorted(_lines(content)))}

    def tail(self, file_name: str, lines: int = 10) -> str:
        """Display the last part of a file of any extension.

        Args:
            file_name: The name of the file to display. No path is allowed and you can only perform on file at
                local directory.
            lines: The number of lines to display from the end of the file. Defaults to 10.

        Returns:
            JSON object {"last_lines": str}.
        """
        if not isinstance(lines, int) or isinstance(lines, bool) or lines < 0:
            raise ToolError(f"tail: lines must be a non-negative integer, got {lines!r}.")
        all_lines = _lines(self._file(file_name)["content"])
        return {"last_lines": "\n".join(all_lines[len(all_lines) - lines :] if lines else [])}

    def diff(self, file_name1: str, file_name2: str) -> str:
        """Compare two files of any extension line by line at the current directory.

        Args:
            file_name1: The name of the first file in current directory.
            file_name2: The name of the second file in current directory.

        Returns:
            JSON object {"diff_lines": str}: for each line number where the files differ, "- <line of file 1>"
            then "+ <line of file 2>"; empty when the files are identical.
        """
        first = _lines(self._file(file_name1)["content"])
        second = _lines(self._file(file_name2)["content"])
        out: list[str] = []
        for i in range(max(len(first), len(second))):
            left = first[i] if i < len(first) else None
            right = second[i] if i < len(second) else None
            if left != right:
                if left is not None:
                    out.append(f"- {left}")
                if right is not None:
                    out.append(f"+ {right}")
        return {"diff_lines": "\n".join(out)}

    def du(self, human_readable: bool = False) -> str:
        """Estimate the disk usage of the current directory and its contents (bytes of file content).

        Args:
            human_readable: If True, returns the size in human-readable format (e.g., KB, MB). Defaults to False.

        Returns:
            JSON object {"disk_usage": str}, e.g. "205 bytes" or "1.50 KB".
        """
        size = self._size(self._here())
        if not human_readable or size < 1024:
            return {"disk_usage": f"{size} bytes"}
        value = float(size)
        for unit in ("KB", "MB", "GB", "TB"):
            value /= 1024
            if value < 1024:
                break
        return {"disk_usage": f"{value:.2f} {unit}"}

    def mv(self, source: str, destination: str) -> str:
        """Move a file or directory from one location to another, or rename it.

        Args:
            source: Source name of the file or directory to move. Source must be local to the current directory.
            destination: The destination name to move the file or directory to. Destination must be local to the
                current directory and cannot be a path. If destination is an existing directory, the source is
                moved into it; otherwise destination is the new name.

        Returns:
            JSON object {"result": str} describing the move, or an error.
        """
        return {"result": self._transfer(source, destination, keep_source=False)}

    def cp(self, source: str, destination: str) -> str:
        """Copy a file or directory from one location to another.

        If the destination is a directory, the source file or directory will be copied into the destination
        directory. Both source and destination must be local to the current directory.

        Args:
            source: The name of the file or directory to copy.
            destination: The destination name to copy the file or directory to. If the destination is a directory,
                the source will be copied into this directory. No file paths allowed.

        Returns:
            JSON object {"result": str} describing the copy, or an error.
        """
        return {"result": self._transfer(source, destination, keep_source=True)}

    def rm(self, file_name: str) -> str:
        """Remove a file or directory (with its contents) from the current directory.

        Args:
            file_name: The name of the file or directory to remove.

        Returns:
            JSON object {"result": str}, or an error.
        """
        here = self._here()
        self._check_name(file_name, "file name")
        if file_name not in here:
            raise ToolError(f"rm: cannot remove '{file_name}': No such file or directory.")
        del here[file_name]
        return {"result": f"'{file_name}' removed."}

    def rmdir(self, dir_name: str) -> str:
        """Remove an empty directory at current directory.

        Args:
            dir_name: The name of the directory to remove. Directory must be local to the current directory.

        Returns:
            JSON object {"result": str}, or an error if it is not an empty directory.
        """
        here = self._here()
        self._check_name(dir_name, "directory name")
        node = here.get(dir_name)
        if node is None:
            raise ToolError(f"rmdir: failed to remove '{dir_name}': No such directory.")
        if node["type"] != "directory":
            raise ToolError(f"rmdir: failed to remove '{dir_name}': Not a directory.")
        if node["contents"]:
            raise ToolError(f"rmdir: failed to remove '{dir_name}': Directory not empty.")
        del here[dir_name]
        return {"result": f"Directory '{dir_name}' removed."}
