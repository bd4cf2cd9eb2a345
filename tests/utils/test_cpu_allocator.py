"""keep_freed_memory: large tensors reuse the process's memory (no page
faults when the next one is allocated), counted by the kernel's own minor
page-fault counter, in fresh processes (the setting is process-wide)."""
import json
import os
import platform
import subprocess
import sys

import pytest

from sapiens_mm.utils import cpu_allocator

pytestmark = pytest.mark.skipif(
    platform.system() != 'Linux' or platform.libc_ver()[0] != 'glibc',
    reason='glibc malloc only')

# The module is loaded from its file: importing the sapiens_mm package
# (every registry) would take most of the test's time.
SCRIPT = '''
import importlib.util, json, resource, sys
import torch
spec = importlib.util.spec_from_file_location('cpu_allocator', sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
keep_freed_memory = module.keep_freed_memory

def faults_of_a_fresh_64mb_tensor():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    torch.ones(16 * 2**20)  # 64 MB of float32, written, then freed
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

faults_of_a_fresh_64mb_tensor()
default = faults_of_a_fresh_64mb_tensor()
applied = keep_freed_memory()
for _ in range(3):  # the heap grows to hold the block (measured: 2 passes)
    faults_of_a_fresh_64mb_tensor()
kept = faults_of_a_fresh_64mb_tensor()
print(json.dumps(dict(default=default, applied=applied, kept=kept)))
'''


def test_freed_memory_is_reused_without_page_faults():
    env = {k: v for k, v in os.environ.items()
           if k != 'SAPIENS_MM_SYSTEM_MALLOC'}
    proc = subprocess.run(
        [sys.executable, '-c', SCRIPT, cpu_allocator.__file__], env=env,
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    # glibc's default: a fresh mmap per 64 MB tensor, one fault per 4 KB
    # page (16,384; huge pages would cut it, hence the loose bound)
    assert got['default'] > 1000
    assert got['applied'] is True
    # kept: the second tensor lands in memory the process already has
    # (a few faults of Python's own small allocations at most)
    assert got['kept'] < 50


def test_the_environment_opts_out(monkeypatch):
    calls = []
    monkeypatch.setattr(cpu_allocator.ctypes, 'CDLL',
                        lambda *a: calls.append(a))
    monkeypatch.setenv('SAPIENS_MM_SYSTEM_MALLOC', '1')
    # the uncached function: this process's setting is not touched
    assert cpu_allocator.keep_freed_memory.__wrapped__() is False
    assert calls == []  # mallopt was not even looked up
