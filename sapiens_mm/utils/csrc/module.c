/*
 * The CPU kernels' shared library as a Python extension module, so that
 * setuptools builds and installs it beside the package's Python files
 * (sapiens_mm/utils/_cpu_kernels*.so). sapiens_mm loads it with ctypes
 * (sapiens_mm.utils.cpu_kernels); importing it gives an empty module.
 *
 * SAPIENS_KERNELS_SOURCES is the digest of the csrc/ sources the library
 * was built from (sapiens_mm.utils.cpu_kernels_build.source_digest): a
 * library older than the sources beside it is not used.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#ifndef SAPIENS_KERNELS_SOURCES
#error "build through setup.py: SAPIENS_KERNELS_SOURCES names the sources"
#endif

const char *sapiens_kernels_sources(void) { return SAPIENS_KERNELS_SOURCES; }

static struct PyModuleDef kernels_module = {
    PyModuleDef_HEAD_INIT, "_cpu_kernels",
    "sapiens_mm's CPU kernels (loaded with ctypes by "
    "sapiens_mm.utils.cpu_kernels).",
    -1, NULL, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__cpu_kernels(void) {
    return PyModule_Create(&kernels_module);
}
