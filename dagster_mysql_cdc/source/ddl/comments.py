"""Executable comments (``/*! ... */``, ``/*!NNNNN ... */``, MariaDB ``/*M! ... */``): resolved before
parsing, with the server's version gating when a server version is known (see docs/ddl.md)."""

from __future__ import annotations


def version_number(server_version: str) -> int:
    """``"10.11.6-MariaDB-log"`` -> 101106, ``"8.0.36"`` -> 80036."""
    core = server_version.split("-", 1)[0]
    parts = [p for p in core.split(".")][:3]
    nums = []
    for p in parts:
        digits = ""
        for ch in p:
            if not ch.isdigit():
                break
            digits += ch
        nums.append(int(digits or 0))
    while len(nums) < 3:
        nums.append(0)
    return nums[0] * 10000 + nums[1] * 100 + nums[2]


def _skip_quoted(sql: str, i: int) -> int:
    """Index just past the quoted string/identifier starting at ``sql[i]``."""
    q = sql[i]
    j = i + 1
    n = len(sql)
    while j < n:
        ch = sql[j]
        if ch == "\\" and q != "`":
            j += 2
            continue
        if ch == q:
            if j + 1 < n and sql[j + 1] == q:
                j += 2
                continue
            return j + 1
        j += 1
    return n


def resolve_executable_comments(sql: str, version: int | None, mariadb: bool) -> str:
    """Replace executable comments by their content (when executed) or by a space.

    A character scanner that honours quotes and ``--``/``#`` comments; see docs/ddl.md "Comments".
    """
    if "/*" not in sql:
        return sql
    out: list[str] = []
    i = 0
    n = len(sql)
    while i < n:
        ch = sql[i]
        if ch in "'\"`":
            j = _skip_quoted(sql, i)
            out.append(sql[i:j])
            i = j
            continue
        if ch == "#" or (sql.startswith("--", i) and (i + 2 >= n or sql[i + 2] in " \t\r\n")):
            j = sql.find("\n", i)
            j = n if j < 0 else j
            out.append(sql[i:j])
            i = j
            continue
        if sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            if end < 0:
                out.append(sql[i:])
                break
            k = i + 2
            mariadb_only = False
            if sql.startswith("!", k):
                k += 1
            elif sql.startswith("M!", k):
                k += 2
                mariadb_only = True
            else:
                out.append(sql[i : end + 2])
                i = end + 2
                continue
            m = k
            while m < end and m - k < 6 and sql[m].isdigit():
                m += 1
            ver = int(sql[k:m]) if m > k else None
            if _executes(ver, mariadb_only, version, mariadb):
                out.append(" " + sql[m:end] + " ")
            else:
                out.append(" ")
            i = end + 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _executes(ver: int | None, mariadb_only: bool, version: int | None, mariadb: bool) -> bool:
    if mariadb_only and not mariadb:
        return False
    if version is None or ver is None:
        return True
    if mariadb and not mariadb_only and 50700 <= ver <= 99999:
        return False
    return version >= ver
