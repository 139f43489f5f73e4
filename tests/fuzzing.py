"""Seeded mutation fuzzing of every carray parser, in a worker process.

Each case is ``(kind, fixture, seed)``: the worker copies the fixture (a file
or a directory from ``tests/data``, or a superchunk dataset made by
:func:`make_superchunk_fixtures`), mutates one of its files with a
``random.Random(seed)`` (bit flips, interesting integers, truncation,
insertion, deletion, splicing of byte ranges, edits of JSON fields, a missing
file), reads it back through every public reader of that kind and answers
one line of JSON: ``ok`` (read), ``typed`` (a :class:`carray.errors.CArrayError`)
or ``untyped`` (anything else, with the traceback's last frames).

The parent (:class:`Fuzzer`) sends cases one at a time and turns a worker that
dies (a segfault) into a ``crash`` outcome and one that does not answer within
the per-case timeout into a ``hang``; it then starts a new worker and goes
on.  The worker caps its address space, so an allocation of what a damaged
header claims ends as a ``MemoryError`` (``untyped``) instead of swapping.

Run as a script for a soak: ``python tests/fuzzing.py --cases 5000``.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import resource
import select
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

DATA = Path(__file__).parent / "data"
#: Cases per kind; the environment variable raises it for soak runs.
CASES_ENV = "CARRAY_FUZZ_CASES"
CASE_TIMEOUT = 20.0
#: Set to also run ``carray verify``'s checks (:func:`carray.registry.verify`) on every case.
VERIFY_ENV = "CARRAY_FUZZ_VERIFY"
#: Address space of a worker: far above any fixture, far below the machine.
MEMORY_LIMIT = 3 << 30

KINDS = ("bcolz", "table", "superchunk", "b2nd", "caterva", "bloscpack", "ds", "chunk")
_INTERESTING = (0, 1, 0x7F, 0x80, 0xFF, 0x7FFF, 0xFFFF, 2**31 - 1, 2**31, 2**32 - 1,
                2**32, 2**62, 2**63 - 1, 2**64 - 1)
_JSON_VALUES = (None, True, -1, 0, 2**31, 2**63, 2**64, 10**30, 1.5, float("inf"), "",
                "O", "T", "|O", "[('a', 'O'), ('b', '<i8')]", "S0", "V0", "<f8", "zstd",
                [], [0], [2**63], [-1, 2], {}, {"a": None}, [[[]]], "x" * 300)


# -- fixtures -----------------------------------------------------------------------------------

def fixtures(kind: str, made: Path | None = None) -> list[Path]:
    """The fixtures of ``kind`` (``made`` holds the superchunk datasets we create)."""
    if kind == "superchunk":
        return sorted(p for p in made.iterdir() if p.is_dir()) if made else []
    pattern = {"bcolz": "bcolz/c_*.bcolz", "table": "bcolz/[tz]_*.bcolz",
               "b2nd": "blosc2/*.b2*", "caterva": "caterva/*.caterva",
               "bloscpack": "bloscpack/*.blp", "ds": "ds/*.ds",
               "chunk": "blosc_chunks/*.blosc"}[kind]
    found = sorted(DATA.glob(pattern))
    if kind == "bcolz":
        found = [p for p in found if p.name != "c_object_pickle.bcolz"]
    if kind == "table":
        found = [p for p in found if (p / "__rootdirs__").exists()]
    return found


def make_superchunk_fixtures(root: Path) -> Path:
    """A few superchunk datasets: 1-d, N-d with blocks, records, checksums, attrs."""
    import numpy as np

    import carray as ca

    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    specs = {
        "sc_i8_attrs": (np.arange(5000, dtype="i8"), {"chunklen": 1000}),
        "sc_f4_nd": (rng.random((40, 30, 20), dtype="f4"), {"chunks": (16, 16, 8),
                                                           "blocks": (8, 8, 4)}),
        "sc_records": (np.array([(i, i / 3, b"ab%d" % i) for i in range(700)],
                                dtype=[("a", "<i4"), ("b", "<f8"), ("c", "S5")]),
                       {"chunklen": 128}),
        "sc_crc32_blosc1": (np.arange(3000, dtype="u2"),
                            {"chunklen": 512, "storage": {"checksum": "crc32", "blosc1": True,
                                                          "spare": 0}}),
        "sc_sha256_str": (np.array([f"x{i}" for i in range(500)], dtype="U6"),
                          {"chunklen": 100, "storage": {"checksum": "sha256"}}),
    }
    for name, (data, kw) in specs.items():
        path = root / name
        if path.exists():
            continue
        a = ca.carray(data, rootdir=str(path), mode="w", **kw)
        a.attrs["units"] = "m"
        a.attrs["scale"] = np.float32(0.5)
        a.attrs["table"] = np.arange(6, dtype="i2").reshape(2, 3)
        a.attrs["nested"] = {"list": [1, 2.5, "s"], "bytes": b"\x00\x01"}
        a.flush()
    return root


# -- mutations ----------------------------------------------------------------------------------

def _pick_file(target: Path, rng: random.Random) -> Path | None:
    if target.is_file():
        return target
    files = sorted(p for p in target.rglob("*") if p.is_file())
    if not files:
        return None
    meta = [p for p in files if p.suffix not in (".blp", ".chunk") or "meta" in p.parts]
    # Metadata is where most parsing happens: pick it more often than chunk files.
    return rng.choice(meta if meta and rng.random() < 0.6 else files)


def _mutate_json(data: bytes, rng: random.Random) -> bytes | None:
    try:
        obj = json.loads(data)
    except ValueError:
        return None
    # A file with a checksum keeps a valid one: the reader's checks of what it says
    # are what the mutation reaches (a damaged checksum is the byte flips' part).
    checked = isinstance(obj, dict) and obj.pop("crc32", None) is not None
    slots: list[tuple[object, object]] = []

    def walk(o: object, depth: int) -> None:
        if depth > 8:
            return
        items = o.items() if isinstance(o, dict) else enumerate(o) if isinstance(o, list) \
            else ()
        for k, v in items:
            slots.append((o, k))
            walk(v, depth + 1)

    walk(obj, 0)
    if not slots:
        return None
    for _ in range(rng.randint(1, 3)):
        container, key = rng.choice(slots)
        choice = rng.random()
        if choice < 0.15 and isinstance(container, dict):
            container.pop(key, None)
        elif choice < 0.25:
            container[key] = "[" * rng.choice((100, 5000, 100_000))  # becomes deep text
        else:
            container[key] = rng.choice(_JSON_VALUES)
    try:
        if checked and isinstance(obj, dict):
            from carray.core.checkedjson import dumps_checked

            return dumps_checked(obj)
        return json.dumps(obj).encode()
    except (ValueError, TypeError):
        return None


def mutate_bytes(data: bytes, rng: random.Random, donor: bytes = b"") -> bytes:
    """One to four random edits of ``data``.

    Half of the time the length is kept (flips, integers, overwriting splices):
    formats that check their length up front are then damaged deeper inside.
    """
    buf = bytearray(data)
    keep_length = rng.random() < 0.5
    for _ in range(rng.randint(1, 4)):
        op = rng.random()
        if keep_length and 0.45 <= op < 0.82:
            op = 0.9  # a splice instead of a truncation, insertion or deletion
        n = len(buf)
        if op < 0.25 and n:  # bit flips
            for _ in range(rng.randint(1, 8)):
                buf[rng.randrange(n)] ^= 1 << rng.randrange(8)
        elif op < 0.45 and n:  # an interesting integer over a field
            width = min(rng.choice((1, 2, 4, 8)), n)
            value = rng.choice(_INTERESTING) & ((1 << (8 * width)) - 1)
            # Headers are mostly in the first bytes: aim there half of the time.
            top = n - width + 1 if rng.random() < 0.5 else min(n - width + 1, 128)
            at = rng.randrange(top)
            buf[at:at + width] = value.to_bytes(width, rng.choice(("little", "big")))
        elif op < 0.6:  # truncation
            del buf[rng.randrange(n + 1):]
        elif op < 0.72:  # insertion
            at = rng.randrange(n + 1)
            buf[at:at] = bytes(rng.randrange(256) for _ in range(rng.choice((1, 4, 8, 64))))
        elif op < 0.82 and n:  # deletion of a range
            at = rng.randrange(n)
            del buf[at:at + rng.choice((1, 4, 8, 100))]
        else:  # splice: a range of this file or a donor copied over another place
            src = donor if donor and rng.random() < 0.5 else bytes(buf)
            if not src or not n:
                continue
            a = rng.randrange(len(src))
            at = rng.randrange(n)
            piece = src[a:a + rng.choice((4, 8, 16, 64, 512))]
            if keep_length:
                piece = piece[:n - at]
            buf[at:at + len(piece)] = piece
    return bytes(buf)


def mutate(target: Path, rng: random.Random, donors: list[Path]) -> str:
    """Damage ``target`` (a copied fixture) in place; returns what was done."""
    victim = _pick_file(target, rng)
    if victim is None:
        return "empty"
    if target.is_dir() and rng.random() < 0.05:
        victim.unlink()
        return f"deleted {victim.relative_to(target)}"
    data = victim.read_bytes()
    if rng.random() < 0.4 and data[:1] in (b"{", b"["):
        edited = _mutate_json(data, rng)
        if edited is not None:
            victim.write_bytes(edited)
            return f"json edit of {victim.name}"
    if rng.random() < 0.4 and data.startswith(b"ds-") and data.count(b"\n") >= 2:
        first, header, body = data.split(b"\n", 2)  # the ds header is its second line
        edited = _mutate_json(header, rng)
        if edited is not None:
            victim.write_bytes(b"\n".join((first, edited, body)))
            return "json edit of the ds header"
    donor = b""
    if donors:
        d = _pick_file(rng.choice(donors), rng)
        donor = d.read_bytes() if d is not None else b""
    victim.write_bytes(mutate_bytes(data, rng, donor))
    return f"bytes edit of {victim.name if target.is_dir() else 'file'}"


# -- readers (run in the worker) ----------------------------------------------------------------

def _read_container(path: Path) -> None:
    import carray as ca

    a = ca.open(str(path), mode="r")
    try:
        dict(a.attrs)
        a[:] if a.shape else a[()]  # a 0-d array has no rows: its value
        if a.shape and a.shape[0]:
            a[a.shape[0] // 2]
    finally:
        close = getattr(a, "close", None)
        if close is not None:
            close()


def readers(kind: str, path: Path) -> list[Callable[[], object]]:
    """Every public reader of a ``kind`` of file, bound to ``path``."""
    found = _readers(kind, path)
    if os.environ.get(VERIFY_ENV) and kind not in ("chunk",) and not kind.startswith("self"):
        from carray import registry

        found.append(lambda: list(registry.verify(str(path))))
    return found


def _readers(kind: str, path: Path) -> list[Callable[[], object]]:
    p = str(path)
    if kind in ("bcolz", "table", "superchunk"):
        return [lambda: _read_container(path)]
    if kind in ("b2nd", "caterva"):
        from carray.layouts.b2nd import frame as b2frame

        def frame() -> None:
            with b2frame.read_frame(p) as f:
                dict(f.vlmeta)
                f.read()

        return [frame, lambda: _read_container(path)]
    if kind == "bloscpack":
        from carray.formats import bloscpack

        return [lambda: bloscpack.info(p), lambda: bloscpack.unpack_bytes(p),
                lambda: bloscpack.unpack_array(p)]
    if kind == "ds":
        from carray.formats import ds

        return [lambda: ds.read_header(p), lambda: ds.read(p)]
    if kind == "chunk":
        return [lambda: _read_chunk(path, True), lambda: _read_chunk(path, False)]
    if kind == "selftest-crash":  # the harness's own tests: a reader that segfaults ...
        import faulthandler

        return [faulthandler._sigsegv]
    if kind == "selftest-hang":  # ... and one that never returns
        return [lambda: time.sleep(3600)]
    raise ValueError(f"unknown kind {kind!r}")


def _read_chunk(path: Path, whole: bool) -> None:
    import numpy as np

    from carray.codecs import blosc, ranged

    raw = path.read_bytes()
    if whole:
        blosc.decompress(raw)
        return
    h = blosc.read_header(raw)
    ts = max(h.typesize, 1)
    out = np.empty(min(h.nbytes, 64) // ts, dtype=f"V{ts}")
    ranged.getitem_ranged(lambda o, n: raw[o:o + n], 0, out, len(raw))


def run_case(kind: str, fixture: str, seed: int, scratch: Path, donors: list[str],
             files: dict[str, bytes] | None = None) -> dict:
    """Copy, mutate and read one case; classify the outcome."""
    from carray.errors import CArrayError

    src = Path(fixture)
    work = scratch / f"case{seed}"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    target = work / src.name
    if src.is_dir():
        shutil.copytree(src, target)
    else:
        shutil.copyfile(src, target)
    if files is not None:  # given metadata files instead of a random mutation
        for rel, data in files.items():
            (target / rel).write_bytes(data)
        what = "given files"
    elif seed >= 0:
        what = mutate(target, random.Random(seed), [Path(d) for d in donors])
    else:
        what = "unmutated"
    outcome, detail = "ok", ""
    try:
        for read in readers(kind, target):
            # Every reader runs: the worst outcome of them all is the case's.
            try:
                read()
            except CArrayError as exc:
                if outcome == "ok":
                    outcome, detail = "typed", f"{type(exc).__name__}: {exc}"[:300]
            except Exception as exc:  # noqa: BLE001 - classifying is the point
                frames = traceback.format_exception(exc)[-4:]
                outcome, detail = "untyped", "".join(frames)[-1500:]
                break
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {"outcome": outcome, "detail": detail, "what": what}


def worker_main(scratch: str) -> None:
    """Answer cases read from stdin, one JSON line each, until stdin closes."""
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    import carray  # noqa: F401 - imported once, before the first case's clock starts

    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        case = json.loads(line)
        files = case.get("files")
        if files is not None:
            files = {k: bytes.fromhex(v) for k, v in files.items()}
        result = run_case(case["kind"], case["fixture"], case["seed"], Path(scratch),
                          case.get("donors", []), files)
        print(json.dumps(result), flush=True)


# -- the parent ---------------------------------------------------------------------------------

class Fuzzer:
    """Runs cases in a worker process, surviving its crashes and hangs."""

    def __init__(self, scratch: Path, timeout: float = CASE_TIMEOUT) -> None:
        self.scratch = scratch
        self.timeout = timeout
        self.proc: subprocess.Popen | None = None

    def _start(self) -> None:
        env = dict(os.environ, PYTHONFAULTHANDLER="1")
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--worker", str(self.scratch)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True, bufsize=1)
        ready = self._answer(120.0)
        if not isinstance(ready, dict) or not ready.get("ready"):
            raise RuntimeError(f"fuzz worker did not start: {self._stop()}")

    def _answer(self, timeout: float) -> dict | str:
        """The worker's answer, or ``"hang"`` (none in time) or ``"crash"`` (it died)."""
        assert self.proc is not None and self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            return "hang"
        line = self.proc.stdout.readline()
        return json.loads(line) if line else "crash"

    def _stop(self) -> str:
        """Kill the worker (if alive); return the end of what it wrote to stderr."""
        proc, self.proc = self.proc, None
        if proc is None:
            return ""
        if proc.poll() is None:
            proc.kill()
        try:
            _, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            err = ""
        return (err or "")[-1500:] + f" (exit {proc.returncode})"

    def run(self, kind: str, fixture: Path, seed: int, donors: list[Path] = (),
            files: dict[str, bytes] | None = None) -> dict:
        """One case; its outcome is ok, typed, untyped, crash or hang."""
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        case = {"kind": kind, "fixture": str(fixture), "seed": seed,
                "donors": [str(d) for d in donors]}
        if files is not None:
            case["files"] = {k: v.hex() for k, v in files.items()}
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(case) + "\n")
            self.proc.stdin.flush()
            answer = self._answer(self.timeout)
        except (BrokenPipeError, OSError):
            answer = "crash"
        if isinstance(answer, dict):
            return answer
        return {"outcome": answer, "detail": self._stop(), "what": ""}

    def close(self) -> None:
        if self.proc is not None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._stop()
            self.proc = None


def cases(kind: str, fixture_list: list[Path], count: int, base_seed: int) -> Iterator[tuple]:
    """``count`` seeded cases spread over the fixtures of one kind."""
    rng = random.Random(f"{kind}:{base_seed}")
    for i in range(count):
        fixture = fixture_list[i % len(fixture_list)]
        others = [f for f in fixture_list if f != fixture]
        yield fixture, base_seed * 1_000_003 + i, rng.sample(others, min(2, len(others)))


BAD = ("untyped", "crash", "hang")


def soak(count: int, base_seed: int, kinds: tuple[str, ...], budget: float | None) -> int:
    """Run ``count`` cases of each kind; print a summary; return the number of bad cases."""
    tmp = Path(tempfile.mkdtemp(prefix="carray-fuzz-"))
    made = make_superchunk_fixtures(tmp / "made")
    fuzzer = Fuzzer(tmp / "scratch")
    totals: dict[str, collections.Counter] = {}
    bad = 0
    start = time.monotonic()
    try:
        for kind in kinds:
            totals[kind] = collections.Counter()
            for fixture, seed, donors in cases(kind, fixtures(kind, made), count, base_seed):
                if budget is not None and time.monotonic() - start > budget:
                    break
                r = fuzzer.run(kind, fixture, seed, donors)
                totals[kind][r["outcome"]] += 1
                if r["outcome"] in BAD:
                    bad += 1
                    print(f"{r['outcome'].upper()} {kind} {fixture.name} seed={seed} "
                          f"({r['what']}):\n{r['detail']}\n", flush=True)
    finally:
        fuzzer.close()
        shutil.rmtree(tmp, ignore_errors=True)
    n = sum(sum(c.values()) for c in totals.values())
    for kind, c in totals.items():
        print(f"{kind:11s} {dict(c)}")
    print(f"{n} fuzzed files in {time.monotonic() - start:.0f} s; {bad} crashes, hangs or "
          "untyped errors")
    return bad


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--worker", metavar="SCRATCH", help=argparse.SUPPRESS)
    p.add_argument("--cases", type=int, default=int(os.environ.get(CASES_ENV, "200")),
                   help="cases per kind")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--kinds", default=",".join(KINDS))
    p.add_argument("--budget", type=float, default=None, help="seconds for the whole run")
    args = p.parse_args(argv)
    if args.worker:
        worker_main(args.worker)
        return 0
    return 1 if soak(args.cases, args.seed, tuple(args.kinds.split(",")), args.budget) else 0


if __name__ == "__main__":
    sys.exit(main())
