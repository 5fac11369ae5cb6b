"""The embedded database runs on the CPUs it says it runs on: the installed pgvector uses no
instruction set beyond `EMBEDDED_CPU_FEATURES` outside the functions it picks at run time, and
a CPU without one of them is refused with a message before the cluster starts.

A pgvector compiled for the machine that built the wheel (`-march=native` on a CPU with
AVX-512, as one release of the wheel was) starts, then stops the server with an illegal
instruction at the first vector compared on any other CPU. The instructions are read from the
library itself with binutils' `objdump`, so the check holds on any machine, whatever its own CPU.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest

from service.embedded_postgres import (
    EMBEDDED_CPU_FEATURES,
    UnsupportedCpu,
    require_cpu_features,
    start_cluster,
)

RUNTIME_DISPATCHED = re.compile(r"avx512", re.IGNORECASE)
"""pgvector's functions it calls only after asking the CPU (`cpuid`) whether it has their
instructions: the AVX-512 popcount kernels of its bit distances (`…Avx512Popcount`), and the
`.avx512f`-style clones a compiler's `target_clones` would name."""

AVX512_OPERAND = re.compile(r"%zmm|%k[0-7]\b|%[xy]mm(1[6-9]|2[0-9]|3[01])\b")
"""Registers only AVX-512 (EVEX) instructions name."""

MNEMONIC_FEATURES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^vf(n?m(add|sub)|maddsub|msubadd)"), "fma"),
    (re.compile(r"^vcvt(ph2ps|ps2ph)$"), "f16c"),
    (re.compile(r"^(shlx|shrx|sarx|rorx|bzhi|pdep|pext|mulx)$"), "bmi2"),
    (re.compile(r"^(andn|blsr|blsi|blsmsk|bextr|tzcnt)$"), "bmi1"),
    (re.compile(r"^lzcnt$"), "abm"),
    (re.compile(r"^popcnt$"), "popcnt"),
    (re.compile(r"^movbe$"), "movbe"),
    (re.compile(r"^(aes|vaes)"), "aes"),
    (re.compile(r"^(pclmul|vpclmul)"), "pclmulqdq"),
    (re.compile(r"^crc32"), "sse4_2"),
)


def features_of(mnemonic: str, operands: str) -> set[str]:
    """The `/proc/cpuinfo` names of the instruction sets one instruction needs (those that
    distinguish x86-64-v3 and v4 from the baseline; SSE up to 4.1 is left out)."""
    needed = {feature for pattern, feature in MNEMONIC_FEATURES if pattern.match(mnemonic)}
    if AVX512_OPERAND.search(operands):
        needed.add("avx512f")
    elif mnemonic.startswith("v"):
        needed.add("avx")
        # 256-bit integer operations, lane permutes and broadcasts from a register are AVX2.
        if "%ymm" in operands and (
            mnemonic.startswith(("vp", "vperm2i", "vinserti", "vextracti", "vgather"))
        ):
            needed.add("avx2")
    return needed


def used_features(library: Path) -> dict[str, set[str]]:
    """Each instruction set the library's code uses outside the runtime-dispatched functions,
    with the functions that use it."""
    objdump = shutil.which("objdump")
    assert objdump is not None
    disassembly = subprocess.run(  # noqa: S603 - binutils' objdump on an installed library
        [objdump, "-d", "--no-show-raw-insn", str(library)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    used: dict[str, set[str]] = defaultdict(set)
    function = ""
    for line in disassembly.splitlines():
        header = re.match(r"^[0-9a-f]+ <(.+)>:$", line)
        if header:
            function = header.group(1)
            continue
        parts = line.split("\t")
        if len(parts) < 2 or RUNTIME_DISPATCHED.search(function):
            continue
        mnemonic, _, operands = parts[1].strip().partition(" ")
        for feature in features_of(mnemonic, operands):
            used[feature].add(function)
    return used


def installed_pgvector() -> Path:
    spec = importlib.util.find_spec("pgserver")
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations))) / (
        "pginstall/lib/postgresql/vector.so"
    )


def test_the_reader_finds_avx512_fma_and_f16c_instructions() -> None:
    assert features_of("vmovups", "0x8(%rax),%zmm4") == {"avx512f"}
    assert features_of("vfmadd231ps", "%ymm1,%ymm2,%ymm0") == {"fma", "avx"}
    assert features_of("vcvtph2ps", "%xmm0,%ymm1") == {"f16c", "avx"}
    assert features_of("vpaddd", "%ymm1,%ymm2,%ymm0") == {"avx", "avx2"}
    assert features_of("vaddps", "%ymm1,%ymm2,%ymm0") == {"avx"}
    assert features_of("shlx", "%eax,%edx,%ecx") == {"bmi2"}
    assert features_of("addps", "%xmm1,%xmm0") == set()


@pytest.mark.skipif(shutil.which("objdump") is None, reason="needs binutils' objdump")
def test_the_installed_pgvector_needs_only_what_the_start_checks() -> None:
    used = used_features(installed_pgvector())
    # The library was read: its distances are vectorized with AVX at least.
    assert "cosine_distance" in used["avx"]
    beyond = {
        feature: sorted(functions)[:5]
        for feature, functions in used.items()
        if feature not in EMBEDDED_CPU_FEATURES
    }
    assert beyond == {}


def test_a_cpu_without_avx2_is_refused_before_the_cluster_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    older = frozenset(EMBEDDED_CPU_FEATURES - {"avx2", "fma"} | {"sse4_2", "popcnt"})
    monkeypatch.setattr("service.embedded_postgres.cpu_features", lambda: older)
    with pytest.raises(UnsupportedCpu, match=r"lacks avx2, fma\. Set MNEME_DATABASE_URL"):
        start_cluster(tmp_path / "data")
    assert not (tmp_path / "data").exists()


def test_a_cpu_with_them_or_a_system_that_does_not_say_is_let_through() -> None:
    require_cpu_features(EMBEDDED_CPU_FEATURES | {"avx512f"})
    require_cpu_features(None)
