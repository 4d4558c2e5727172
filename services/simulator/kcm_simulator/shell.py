"""The built-in "shell" a simulated container runs `kubectl exec` commands with.

- `Container.of(pod, name)`: what the container would see: its environment (literal values,
  `$(VAR)` references to earlier ones, and the downward API fields a kubelet resolves), its
  hostname, and the files of its downward API and service-account volumes at their mount paths.
- `Container.run(argv, stdin)`: runs one command line. Built in: `echo [-n]`, `cat [FILE...]`
  (stdin without files), `env`, `printenv [NAME]`, `hostname`, `date` (the container's clock, in
  UTC: the run's start for its logs, the request's time for exec), `ls [DIR...]`, `pwd`, `true`,
  `false`, `exit [N]`, `sleep N` (returns at once), and `sh -c SCRIPT` for `;`, `&&`, `||`
  separated lists of those with `$NAME` expansion. Anything else is not found, as a real runtime
  answers: `NotFound` for the command exec'd directly, exit code 127 inside `sh -c`.
- `reads_stdin(argv)`: whether the command consumes its stdin (so the server waits for it).

Pure; called by `kubeletserver.py` for `/exec`. Documented in docs/simulator.md.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]
_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_ROOT_DIRS = ("bin", "dev", "etc", "home", "proc", "root", "sys", "tmp", "usr", "var")
_SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
_VAR_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")
_SH_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*|\?))")


class NotFound(Exception):
    """The command exec'd directly does not exist; str() is the runtime's reason."""


@dataclass
class Result:
    stdout: bytes = b""
    stderr: bytes = b""
    code: int = 0


def _field(pod: Obj, path: str) -> str | None:
    """A downward API fieldRef's value (`metadata.labels['k']` and the plain fields)."""
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    m = re.fullmatch(r"metadata\.(labels|annotations)\['([^']*)'\]", path)
    if m:
        return str((meta.get(m.group(1)) or {}).get(m.group(2), ""))
    if path in ("metadata.labels", "metadata.annotations"):
        items = sorted((meta.get(path.split(".")[1]) or {}).items())
        return "\n".join(f"{k}={shlex.quote(str(v))}" for k, v in items)
    simple = {
        "metadata.name": meta.get("name"),
        "metadata.namespace": meta.get("namespace"),
        "metadata.uid": meta.get("uid"),
        "spec.nodeName": spec.get("nodeName"),
        "spec.serviceAccountName": spec.get("serviceAccountName"),
        "status.hostIP": status.get("hostIP"),
        "status.hostIPs": ",".join(i.get("ip", "") for i in status.get("hostIPs") or []),
        "status.podIP": status.get("podIP"),
        "status.podIPs": ",".join(i.get("ip", "") for i in status.get("podIPs") or []),
    }
    value = simple.get(path)
    return None if value is None else str(value)


def _expand_refs(text: str, env: dict[str, str]) -> str:
    """`$(VAR)` expanded from the variables defined before, as the kubelet does; `$$(X)` escapes."""
    return _VAR_REF.sub(lambda m: env.get(m.group(1), m.group(0)), text.replace("$$", "\0")).replace(
        "\0", "$"
    )


def _environment(pod: Obj, container: Obj, hostname: str) -> dict[str, str]:
    env = {"PATH": _PATH, "HOSTNAME": hostname, "HOME": "/root"}
    for var in container.get("env") or []:
        if not isinstance(var, dict) or not var.get("name"):
            continue
        name = str(var["name"])
        if "value" in var:
            env[name] = _expand_refs(str(var.get("value") or ""), env)
            continue
        ref = (var.get("valueFrom") or {}).get("fieldRef") or {}
        value = _field(pod, str(ref.get("fieldPath", ""))) if ref else None
        if value is not None:
            env[name] = value
    return env


def _downward_files(pod: Obj, items: list[Any], base: str) -> dict[str, str]:
    files = {}
    for item in items:
        if not isinstance(item, dict):
            continue
        ref = item.get("fieldRef") or {}
        value = _field(pod, str(ref.get("fieldPath", ""))) if ref else None
        if value is not None and item.get("path"):
            files[f"{base}/{item['path']}"] = value
    return files


def _volume_files(pod: Obj, volume: Obj, base: str) -> dict[str, str]:
    """The files a volume shows that the simulator can know: downward API items, and the
    namespace of a service-account token projection (not the token, nor the CA bundle)."""
    if "downwardAPI" in volume:
        return _downward_files(pod, (volume["downwardAPI"] or {}).get("items") or [], base)
    files = {}
    for source in ((volume.get("projected") or {}).get("sources")) or []:
        if not isinstance(source, dict):
            continue
        if "downwardAPI" in source:
            files.update(_downward_files(pod, (source["downwardAPI"] or {}).get("items") or [], base))
    return files


def _files(pod: Obj, container: Obj, hostname: str) -> dict[str, str]:
    volumes = {v.get("name"): v for v in (pod.get("spec") or {}).get("volumes") or [] if isinstance(v, dict)}
    files = {"/etc/hostname": hostname}
    for mount in container.get("volumeMounts") or []:
        volume = volumes.get(mount.get("name")) if isinstance(mount, dict) else None
        if volume is None:
            continue
        base = str(mount.get("mountPath", "")).rstrip("/")
        files.update(_volume_files(pod, volume, base))
    return files


@dataclass
class Container:
    env: dict[str, str]
    hostname: str
    now: dt.datetime  # what `date` prints
    files: dict[str, str] = field(default_factory=dict)

    @staticmethod
    def of(pod: Obj, container: Obj, now: dt.datetime) -> Container:
        spec = pod.get("spec") or {}
        hostname = str(spec.get("hostname") or (pod.get("metadata") or {}).get("name", ""))
        env, files = _environment(pod, container, hostname), _files(pod, container, hostname)
        return Container(env, hostname, now, files)

    # -- file system ----------------------------------------------------------------------

    def _dirs(self) -> set[str]:
        dirs = {"/"} | {f"/{d}" for d in _ROOT_DIRS}
        for path in self.files:
            parts = path.split("/")[1:-1]
            dirs.update("/" + "/".join(parts[: i + 1]) for i in range(len(parts)))
        return dirs

    def _listing(self, path: str) -> list[str] | None:
        """The names `ls PATH` shows; None when there is no such file or directory."""
        path = "/" + path.strip("/")
        if path in self.files:
            return [path.rsplit("/", 1)[1]]
        dirs = self._dirs()
        if path not in dirs:
            return None
        prefix = path if path == "/" else path + "/"
        names = {p[len(prefix) :].split("/", 1)[0] for p in [*self.files, *dirs] if p.startswith(prefix)}
        return sorted(n for n in names if n)

    # -- commands -------------------------------------------------------------------------

    def run(self, argv: list[str], stdin: bytes = b"") -> Result:
        """Run a command exec'd directly; raises NotFound for one that does not exist."""
        if not argv:
            raise NotFound('exec: "": executable file not found in $PATH')
        result = self._builtin(argv, stdin)
        if result is None:
            raise NotFound(f'exec: "{argv[0]}": executable file not found in $PATH')
        return result

    def _builtin(self, argv: list[str], stdin: bytes) -> Result | None:
        name, args = argv[0].rsplit("/", 1)[-1], argv[1:]
        if name in ("sh", "bash", "ash"):
            if len(args) >= 2 and args[0] == "-c":
                return self.script(args[1])
            # An interactive shell reads its commands from stdin.
            return self.script(stdin.decode(errors="replace").replace("\n", ";"))
        if name == "echo":
            newline = not (args and args[0] == "-n")
            text = " ".join(args if newline else args[1:])
            return Result((text + ("\n" if newline else "")).encode())
        if name == "cat":
            return self._cat(args, stdin)
        if name == "env" and not args:
            return Result("".join(f"{k}={v}\n" for k, v in self.env.items()).encode())
        if name == "printenv":
            if not args:
                return self._builtin(["env"], stdin)
            values = [self.env[a] for a in args if a in self.env]
            return Result(
                "".join(v + "\n" for v in values).encode(), code=0 if len(values) == len(args) else 1
            )
        if name == "hostname":
            return Result((self.hostname + "\n").encode())
        if name == "date" and not args:
            # busybox's and coreutils' default format; containers run in UTC unless told otherwise.
            return Result(self.now.astimezone(dt.UTC).strftime("%a %b %e %H:%M:%S UTC %Y\n").encode())
        if name == "pwd":
            return Result(b"/\n")
        if name == "ls":
            return self._ls(args)
        if name in ("true", "sleep"):
            return Result()
        if name == "false":
            return Result(code=1)
        if name == "exit":
            try:
                return Result(code=int(args[0]) % 256 if args else 0)
            except ValueError:
                return Result(stderr=f"sh: exit: Illegal number: {args[0]}\n".encode(), code=2)
        return None

    def _cat(self, args: list[str], stdin: bytes) -> Result:
        if not args or args == ["-"]:
            return Result(stdin)
        out, err, code = b"", b"", 0
        for path in args:
            if path in self.files:
                out += self.files[path].encode()
            elif self._listing(path) is not None:
                err += b"cat: read error: Is a directory\n"
                code = 1
            else:
                err += f"cat: can't open '{path}': No such file or directory\n".encode()
                code = 1
        return Result(out, err, code)

    def _ls(self, args: list[str]) -> Result:
        paths = [a for a in args if not a.startswith("-")] or ["/"]
        out, err, code = [], b"", 0
        for path in paths:
            names = self._listing(path)
            if names is None:
                err += f"ls: {path}: No such file or directory\n".encode()
                code = 1
                continue
            if len(paths) > 1:
                out.append(f"{path}:")
            out.extend(names)
        return Result("".join(n + "\n" for n in out).encode(), err, code)

    def script(self, text: str) -> Result:
        """`sh -c TEXT`: commands separated by `;`, `&&`, `||`, with `$NAME` and `$?` expanded."""
        lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        try:
            tokens = list(lexer)
        except ValueError as exc:
            return Result(stderr=f"sh: syntax error: {exc}\n".encode(), code=2)
        out, err, code = b"", b"", 0
        command: list[str] = []
        skip = False
        for token in [*tokens, ";"]:
            if token not in (";", "&&", "||"):
                command.append(_SH_VAR.sub(functools.partial(self._var, code=code), token))
                continue
            if command and not skip:
                res = self._builtin(command, b"") or Result(
                    stderr=f"sh: {command[0]}: not found\n".encode(), code=127
                )
                out, err, code = out + res.stdout, err + res.stderr, res.code
                if command[0] == "exit":
                    return Result(out, err, code)
            command = []
            skip = (token == "&&" and code != 0) or (token == "||" and code == 0)
        return Result(out, err, code)

    def _var(self, m: re.Match[str], code: int) -> str:
        name = m.group(1) or m.group(2)
        return str(code) if name == "?" else self.env.get(name, "")


def reads_stdin(argv: list[str]) -> bool:
    """Commands that consume stdin: `cat` without files, a shell without `-c`."""
    name = argv[0].rsplit("/", 1)[-1] if argv else ""
    if name == "cat":
        return argv[1:] in ([], ["-"])
    return name in ("sh", "bash", "ash") and "-c" not in argv[1:2]
