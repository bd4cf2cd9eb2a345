"""Text and JSON forms of the benchmark results (the library returns data;
``tools/analysis/benchmark.py`` prints these lines)."""
from typing import List

from .timing import TimingStats

__all__ = ['format_report', 'format_end_to_end', 'format_decode',
           'result_to_json']


def _fmt_s(s: float) -> str:
    return f'{s * 1e3:.1f} ms' if s < 1 else f'{s:.2f} s'


def _fmt_bytes(b: float) -> str:
    return f'{b / 2**20:.0f} MiB'


def _fmt_stats(t: TimingStats) -> str:
    return (f'median {_fmt_s(t.median)}, min {_fmt_s(t.min)}, max '
            f'{_fmt_s(t.max)}')


def _fmt_options(options: dict) -> str:
    return (f"options             compile mode "
            f"{options.get('compile_mode') or 'off'}, attention kernel "
            f"{options.get('sdpa', 'auto')}, CUDA graph "
            f"{'on' if options.get('cuda_graph') else 'off'}, channels-last "
            f"{'on' if options.get('channels_last') else 'off'}")


def _weights_line(result: dict) -> List[str]:
    """The weights' bytes as the model holds them (beside the peak
    memory: the rest of the peak is activations, the process's own
    memory and, in a comparison run, the other models)."""
    w = result.get('weights')
    if not w:
        return []
    packed = (f"linear weights packed in {result['dtype']} "
              f"{_fmt_bytes(w['packed'])}, " if w['packed'] else '')
    return [f"weights             {_fmt_bytes(w['total'])} as held ({packed}"
            f"other parameters and buffers {_fmt_bytes(w['other'])})"]


def format_report(result: dict) -> str:
    """Human-readable lines of a
    :func:`~sapiens_mm.analysis.drivers.benchmark_model` result."""
    lat = result['latency']
    lim = result['limit_s']
    att_rate = result.get('attention_rate')
    lines = [
        f"device {result['device']}"
        + (f" ({result['threads']} threads)" if result['threads'] else '')
        + f", dtype {result['dtype']} ({result['precision']}), batch "
        f"{result['batch_size']}, input {result['img_size'][0]}x"
        f"{result['img_size'][1]}, compile {result['compile']}",
        _fmt_options(result.get('options', {})),
        f"images/s            {result['images_per_s']:.4g}",
        f"latency (per batch) {_fmt_stats(lat)}, IQR {_fmt_s(lat.iqr)} "
        f"({len(lat.times)} runs)",
        f"peak memory         {_fmt_bytes(result['peak_mem'])}"
        f" ({'' if result['mem_exact'] else 'process peak; '}"
        + ('resident set of the process' if result['device'] == 'cpu'
           else 'allocated on the device')
        + f"; {_fmt_bytes(result['base_mem'])} before the timed runs)",
        *_weights_line(result),
        f"FLOPs per batch     {result['flops']['total'] / 1e9:.4g} G "
        f"(matmul {result['flops']['matmul'] / 1e9:.4g} G, attention "
        f"{result['flops']['attention'] / 1e9:.4g} G)",
        f"achieved            {result['gflops_per_s']:.1f} GFLOP/s",
        f"GEMM rate           {result['gemm_rate'] / 1e9:.1f} GFLOP/s (the "
        f"model's own GEMM shapes); attention kernel "
        + (f"{att_rate / 1e9:.1f} GFLOP/s = "
           f"{att_rate / result['gemm_rate']:.2f} of it" if att_rate
           else 'none'),
        f"limit               {_fmt_s(lim['total'])} per batch (matmul "
        f"{_fmt_s(lim['matmul'])}, attention at the GEMM rate "
        f"{_fmt_s(lim['attention'])}); with the attention kernel's own "
        f"rate {_fmt_s(lim['kernels'])}",
        f"achieved/limit      {result['achieved_over_limit']:.3f} (medians)"
        f", {result['achieved_over_limit_min']:.3f} (fastest runs)",
        'kernel rates (this run, medians):',
    ]
    for item, (n, rate) in result['rates'].items():
        if item.kind == 'matmul':
            m, k, nn_ = item.shape
            desc = f'matmul {m}x{k} -> {nn_}'
        else:
            q_size, k_size = item.shape[0][0], item.shape[1][0]
            desc = 'attention ' + 'x'.join(map(str, q_size))
            if len(k_size) > 2 and k_size[-3] != q_size[-3]:
                desc += f' ({k_size[-3]} kv heads)'  # grouped-query
        lines.append(f'  {desc:<40} {str(item.dtype)[6:]:<9} x{n:<4} '
                     f'{rate / 1e9:8.1f} GFLOP/s')
    split = result.get('breakdown')
    if split:
        lines += [
            'in the model (one more pass, each call timed; in brackets the '
            'same work at the rates of the kernel timings):',
            f"  matmul-like       {_fmt_s(split['matmul']):>9} "
            f"({_fmt_s(lim['matmul'])})",
            f"  attention         {_fmt_s(split['attention']):>9} "
            f"({_fmt_s(lim['kernels'] - lim['matmul'])} at the attention "
            f"kernel's rate, {_fmt_s(lim['attention'])} at the GEMM rate)",
            f"  norms             {_fmt_s(split['norm']):>9}",
            f"  everything else   {_fmt_s(split['other']):>9} "
            '(element-wise ops, copies, layout changes, hooks)',
            f"  whole pass        {_fmt_s(split['total']):>9} "
            f"(limit {_fmt_s(lim['total'])})",
        ]
    if result.get('peak_tflops') is not None or 'peak_fraction' in result:
        if result.get('peak_fraction') is not None:
            lines.append(
                f"device peak         {result['peak_tflops']:.4g} TFLOP/s; "
                f"achieved {100 * result['peak_fraction']:.1f} % of it")
        else:
            lines.append('GPU peak            unknown (pass --peak-tflops)')
    if 'eager_max_abs_diff' in result:
        lines.append(f"max abs difference to our eager output "
                     f"{result['eager_max_abs_diff']:.3g}")
    for label, c in result.get('comparisons', {}).items():
        diff = c['max_abs_diff']
        lines.append(
            f"{label:<20}{_fmt_stats(c['latency'])}, peak memory "
            f"{_fmt_bytes(c['peak_mem'])}; speed ratio {c['speedup']:.3f} "
            f"(their time / ours; {c['min_speedup']:.3f} from the fastest "
            f"runs), max abs output difference "
            + (f'{diff:.3g}' if diff is not None else 'n/a (shapes differ)'))
        for route, r in c.get('speedup_vs', {}).items():
            lines.append(f"{'':<20}against the {route}: speed ratio "
                         f"{r['speedup']:.3f} ({r['min_speedup']:.3f} from "
                         'the fastest runs)')
    lines += [f'WARNING: {w}' for w in result.get('warnings', [])]
    return '\n'.join(lines)


def format_end_to_end(result: dict) -> str:
    """Human-readable lines of an
    :func:`~sapiens_mm.analysis.drivers.end_to_end` result."""
    lat = result['model_latency']
    lines = [
        f"end-to-end          {result['images']} images: "
        f"{_fmt_stats(result['e2e'])} per run, "
        f"{result['e2e_images_per_s']:.4g} images/s (batch "
        f"{result['batch_size']}; tasks {', '.join(result['tasks'])})",
    ]
    if 'pose' in result['tasks']:
        lines.append(f"people per image    {result['crops_per_image']:.2f}")
    lines += [
        f"model only          {result['model_images_per_s']:.4g} images/s "
        f"(one batch: {_fmt_stats(lat)})",
        f"end-to-end / model  {result['ratio']:.3f} (medians), "
        f"{result['ratio_min']:.3f} (fastest runs)",
    ]
    lines += [f'WARNING: {w}' for w in result.get('warnings', [])]
    return '\n'.join(lines)


def format_decode(rows: List[dict]) -> str:
    """Table of :func:`~sapiens_mm.analysis.decode.benchmark_decode`
    results."""
    names = list(rows[0]['ms_per_person']) if rows else []
    head = f'{"heatmaps":>9} {"K":>4} ' + ' '.join(
        f'{n + " ms":>18}' for n in names) + '  speed-up  max |diff| px'
    lines = ['ms per person, heatmap -> keypoints in input pixels, wall '
             'time: median (min); speed-up of the fastest decoder against '
             'mmpose: median (min)', head]
    for r in rows:
        ms, lo = r['ms_per_person'], r['min_ms_per_person']
        size = 'x'.join(str(v) for v in r['heatmap_size'])
        lines.append(
            f'{size:>9} {r["num_keypoints"]:>4} ' + ' '.join(
                f'{f"{ms[n]:.2f} ({lo[n]:.2f})":>18}' for n in names) +
            f'  {r["speedup"]:.0f}x ({r["min_speedup"]:.0f}x)  ' +
            f'{max(r["max_abs_diff_px"].values()):.1e}')
    return '\n'.join(lines)


def result_to_json(result: dict) -> dict:
    """A result of the benchmark drivers with plain JSON types (timings as
    median / min / max / iqr / times, kernel rates as a list of rows)."""
    out = {}
    for key, value in result.items():
        if isinstance(value, TimingStats):
            value = dict(median=value.median, min=value.min, max=value.max,
                         iqr=value.iqr, times=value.times)
        elif key == 'rates':
            value = [
                dict(kind=it.kind,
                     shape=it.shape if it.kind == 'matmul' else
                     [list(s[0]) for s in it.shape],
                     dtype=str(it.dtype), flops=it.flops, calls=n,
                     flops_per_s=rate) for it, (n, rate) in value.items()
            ]
        elif isinstance(value, dict):
            value = result_to_json(value)
        out[key] = value
    return out
