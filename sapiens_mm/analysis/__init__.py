"""Speed of Sapiens models against a limit computed from the machine.

- :mod:`~sapiens_mm.analysis.flops`: the matmul-like and attention calls of
  a forward pass (:func:`count_work`);
- :mod:`~sapiens_mm.analysis.timing`: timing loops, statistics, peak
  memory;
- :mod:`~sapiens_mm.analysis.limit`: the kernel rates measured on the
  model's own shapes and the limit they give (attention counted at the
  GEMM rate);
- :mod:`~sapiens_mm.analysis.builders`: the models to time and compare;
- :mod:`~sapiens_mm.analysis.drivers`: :func:`benchmark_model` and
  :func:`end_to_end`; :mod:`~sapiens_mm.analysis.decode`: heatmap decoding;
- :mod:`~sapiens_mm.analysis.report`: text and JSON forms of the results.

``tools/analysis/benchmark.py`` is the command line.

Example:
    >>> from sapiens_mm.analysis import (benchmark_model, build_backbone,
    ...                                  format_report)
    >>> model = build_backbone('sapiens_tiny', (256, 192))
    >>> result = benchmark_model(model, batch_size=1, img_size=(256, 192))
    >>> text = format_report(result)
"""
from .builders import (
                       EXPORT_RUNTIMES,
                       ExportedRuntime,
                       TransformersSapiens2,
                       backbone_config,
                       build_backbone,
                       build_exported_runtimes,
                       build_registry_route,
                       build_stock_backbone,
                       build_transformers_sapiens2,
                       export_onnx,
                       is_sapiens2_arch,
)
from .decode import benchmark_decode, peaked_heatmaps
from .drivers import (BENCHMARK_DTYPES, COMPILE_MODES, benchmark_model,
                      end_to_end, weight_bytes)
from .flops import Work, WorkItem, count_work
from .limit import (
                       KNOWN_GPU_PEAK_TFLOPS,
                       gemm_limit_seconds,
                       gemm_rate,
                       gpu_peak_tflops,
                       kernel_calls,
                       kernel_limit_seconds,
                       limit_seconds,
                       limit_warnings,
                       measure_rates,
)
from .report import format_decode, format_end_to_end, format_report, result_to_json
from .timing import PeakMemory, TimingStats, time_callable

__all__ = [
    'BENCHMARK_DTYPES', 'COMPILE_MODES', 'KNOWN_GPU_PEAK_TFLOPS', 'Work',
    'WorkItem', 'TimingStats', 'PeakMemory', 'backbone_config',
    'build_backbone', 'build_registry_route', 'build_stock_backbone',
    'is_sapiens2_arch', 'TransformersSapiens2', 'build_transformers_sapiens2',
    'EXPORT_RUNTIMES', 'ExportedRuntime', 'export_onnx',
    'build_exported_runtimes', 'weight_bytes', 'count_work',
    'kernel_calls', 'measure_rates', 'limit_seconds', 'gemm_rate',
    'gemm_limit_seconds', 'kernel_limit_seconds', 'limit_warnings',
    'gpu_peak_tflops', 'time_callable', 'benchmark_model', 'end_to_end',
    'benchmark_decode', 'peaked_heatmaps', 'format_report',
    'format_end_to_end', 'format_decode', 'result_to_json'
]
