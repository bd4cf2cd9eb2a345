"""Command line of :class:`~sapiens_mm.apis.SapiensInferencer`.

Used by ``tools/infer.py`` and ``python -m sapiens_mm``. Every option maps
to an argument of the inferencer (constructor or call).
"""
import argparse
import json
import os.path as osp
from typing import List, Optional, Sequence, Union

from sapiens_mm.cli.preflight import load_bboxes, model_options, preflight
from sapiens_mm.tasks import CLI_TASKS
from sapiens_mm.utils.commands import python_command
from sapiens_mm.utils.media_names import is_glob, is_list_file
from sapiens_mm.utils.sharded_names import (LAUNCHERS, MANIFEST_DIR,
                                            RANK_TIMEOUT_ENV,
                                            check_results_path,
                                            resolve_rank_timeout)

__all__ = [
    'build_parser', 'models_from_args', 'is_sharded', 'main', 'main_sharded',
    'cli'
]

def build_parser(prog: Optional[str] = None) -> argparse.ArgumentParser:
    """The argument parser of the inference CLI."""
    python = python_command()  # printed commands run as printed
    p = argparse.ArgumentParser(
        prog=prog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            'Run Sapiens pose / body-part segmentation / depth / normal '
            'models (and Sapiens2 pointmap / albedo / matting models) on '
            'images, '
            'folders, videos or a webcam.'),
        epilog=(
            'Models: released models by name (--pose sapiens2-pose-0.4b, '
            'or its alias or Hub repository id facebook/sapiens2-pose-0.4b; '
            'downloaded once into the Hugging Face cache: HF_HOME, '
            f'HF_TOKEN, HF_HUB_OFFLINE; {python} tools/download.py '
            '--list '
            'lists them), official checkpoints alone (--checkpoints, task '
            'and size recognised from the file name or weights), or per task '
            'a checkpoint (--pose CKPT) and/or a config (--pose-config CFG; '
            'a config alone runs random weights). A Transformers Sapiens2 '
            'checkpoint (folder or model.safetensors) works as a checkpoint. '
            'An exported .onnx / .pt2 '
            'file (tools/deploy/export.py) works as a checkpoint: its task '
            'and config are read from the file; it runs in fp32.\n\n'
            'Boxes are x1, y1, x2, y2 in pixels everywhere: --bboxes takes '
            'them so and the pose JSON writes them so (its bbox_format: '
            'xyxy).\n\n'
            'Outputs in OUT_DIR/<task>/: <name>.json (pose, COCO-like, '
            'boxes xyxy), '
            '<name>.npy (seg labels, depth, normals at the input resolution; '
            'depth/normals are NaN outside the person when seg runs) and '
            '<name>.png; Sapiens2 pointmaps also <name>.npy (H, W, 3) metric '
            'XYZ and <name>.ply (coloured point cloud); for videos per-frame '
            'files in <name>/ and <name>.mp4. Sapiens2 matting writes '
            '<name>.npy (H, W, 4: pre-multiplied RGB, alpha), '
            '<name>_alpha.png (--alpha-bits), <name>_rgba.png (cut-out) and '
            'a composite onto --background (a green-screen .mp4 for '
            'videos). Inputs with the same name get '
            '<name>_1, <name>_2...; OUT_DIR/outputs.json maps every input to '
            'its files. Files are written atomically; unreadable or '
            'truncated images are skipped with a message, and a run where '
            'every input fails exits with an error. --export-format adds '
            'OUT_DIR/pose_<format>/<name>.json, --save-mask OUT_DIR/mask/. '
            'Each picture has its key and a caption naming its model (and '
            'for pose where the person boxes came from). Ctrl-C stops with '
            'exit code 130, keeping what was written (a video up to its '
            'last frame) and listing it in outputs.json.'
            '\n\n'
            'At scale (a list file or glob input, --launcher pytorch / '
            'slurm, --coco-results, --overwrite, or an --out-dir holding such '
            'a run): '
            'the inputs are streamed and split across the processes; each '
            'input is recorded in OUT_DIR/manifests/ as soon as its files are '
            'written, then in OUT_DIR/manifest.jsonl (merged; instead of '
            'outputs.json) and '
            'OUT_DIR/summary.json; running the same command again resumes '
            '(with any number of processes). SIGTERM stops after the current '
            'batch with exit code 75 (requeue to resume). Launchers: '
            'tools/dist_infer.sh, tools/slurm_infer.sh; see docs/scale.md.'
            '\n\n'
            f'Example:\n  {python} -m sapiens_mm photo.jpg --pose '
            'sapiens2-pose-0.4b --seg sapiens2-seg-0.4b --detector rtmdet-m'
            f'\n  {python} tools/infer.py photo.jpg --checkpoints '
            'sapiens_0.3b_goliath_best_goliath_AP_573.pth '
            'sapiens_0.3b_goliath_best_goliath_mIoU_7673_epoch_194.pth '
            f'--out-dir outputs\n  {python} tools/infer.py photo.jpg '
            '--checkpoints sapiens2_0.4b_seg.safetensors '
            'sapiens2_0.4b_pointmap.safetensors --out-dir outputs'))
    p.add_argument(
        'inputs', nargs='+',
        help='image, video or folder paths, a webcam index (0, webcam, '
        'webcam:1), a list file (.txt / .lst: one path per line, relative '
        'to the list\'s folder; .jsonl: {"path": ...} per line) or a '
        'quoted glob ("data/**/*.jpg")')
    p.add_argument('--out-dir', default='outputs',
                   help='output folder (default: %(default)s)')
    m = p.add_argument_group('models')
    m.add_argument('--checkpoints', nargs='+', default=[], metavar='CKPT',
                   help='released model names, official Sapiens / '
                   'Sapiens2 checkpoints (sapiens2_<size>_<task>.safetensors)'
                   ' or exported .onnx / .pt2 models; the task (and size) of '
                   'each are recognised')
    for task in CLI_TASKS:
        m.add_argument(f'--{task}', metavar='CKPT', default=None,
                       help=f'{task} model: a released model name or Hub '
                       'repository id, a checkpoint, or an exported .onnx / '
                       '.pt2')
        m.add_argument(f'--{task}-config', metavar='CFG', default=None,
                       help=f'{task} config (default: the shipped config of '
                       f'the recognised --{task} checkpoint)')
    m.add_argument('--trust-pt2', action='store_true',
                   help='trust the .pt2 models given (record their SHA-256 '
                   'in the trust store) although they were not exported '
                   'on this machine. A .pt2 graph is a program that runs '
                   'with your rights: only for files you vouch for; prefer '
                   '.onnx for models from elsewhere (docs/security.md)')
    m.add_argument('--tasks', nargs='+', choices=CLI_TASKS, default=None,
                   help='run only these of the given models\' tasks')
    r = p.add_argument_group('runtime')
    r.add_argument('--device', default=None,
                   help='cpu, cuda or cuda:N (default: cuda if available)')
    r.add_argument('--batch-size', type=int, default=1,
                   help='images / person crops per forward pass '
                   '(default: %(default)s)')
    r.add_argument('--dtype', choices=('auto', 'fp32', 'bf16', 'fp16'),
                   default='auto', help='precision (autocast); auto: bf16 '
                   'where the CPU (AVX512_BF16 / AMX, ARM BF16) or GPU has '
                   'native bf16, '
                   'else fp32, logged once (default: %(default)s)')
    r.add_argument('--compile', action='store_true',
                   help='torch.compile the backbones (the first batch pays '
                   'for the compilation)')
    r.add_argument('--max-frames', type=int, default=None,
                   help='read at most this many frames of each video / '
                   'webcam')
    d = p.add_argument_group('person boxes (pose; x1, y1, x2, y2 pixels)')
    d.add_argument('--detector', choices=('auto', 'rtmdet-m', 'hog', 'haar',
                                          'none'),
                   default='auto', help='person detector, used when '
                   '--det-model is not given: rtmdet-m, the official Sapiens '
                   'RTMDet-m person detector (mmdet; downloaded once), or '
                   'built-in OpenCV (hog, haar; no download); auto: rtmdet-m '
                   'where mmdet runs and its weights are cached or can be '
                   'downloaded, else hog, said in one log line (default: '
                   '%(default)s); when it finds no one the whole image is '
                   'used (see --no-whole-image-fallback)')
    # mmpose's inferencer_demo.py names; the older spellings still work
    d.add_argument('--det-model', '--det-config', dest='det_model',
                   default=None,
                   help='mmdet detector config (e.g. the official RTMDet-m '
                   'person detector)')
    d.add_argument('--det-weights', '--det-checkpoint', dest='det_weights',
                   default=None, help='mmdet detector checkpoint')
    d.add_argument('--det-cat-ids', '--det-cat-id', dest='det_cat_ids',
                   type=int, nargs='+', default=[0],
                   help='person class index (or indices) of the mmdet '
                   'detector (default: 0)')
    d.add_argument('--bbox-thr', type=float, default=0.3,
                   help='detector score threshold (default: %(default)s)')
    d.add_argument('--nms-thr', type=float, default=0.3,
                   help='box NMS IoU threshold (default: %(default)s)')
    d.add_argument('--no-whole-image-fallback', action='store_true',
                   help='when the detector finds no one in an image, give '
                   'it no pose (by default pose runs on the whole image as '
                   'one person, said once per run)')
    d.add_argument('--bboxes', default=None,
                   help='person boxes used for every input instead of the '
                   'detector: a JSON file or string with [[x1, y1, x2, y2'
                   '(, score)], ...] in pixels')
    v = p.add_argument_group('video and webcam')
    v.add_argument('--no-track', action='store_true',
                   help='no track IDs (by default each person keeps an ID '
                   'from frame to frame, written to the JSON as track_id '
                   'and drawn in its own colour)')
    v.add_argument('--no-smooth', action='store_true',
                   help='do not smooth the keypoints (One-Euro filter per '
                   'track; still images are never smoothed)')
    v.add_argument('--det-interval', type=int, default=1, metavar='N',
                   help='run the person detector every N frames; between '
                   'them the boxes come from the previous frame\'s '
                   'keypoints, at least a quarter of the size of each '
                   'person\'s '
                   'last detected box (the detector runs when one '
                   'degenerates; default: %(default)s)')
    v.add_argument('--min-cutoff', type=float, default=4.0,
                   help='One-Euro cutoff at rest, Hz; lower smooths more '
                   '(default: %(default)s)')
    v.add_argument('--beta', type=float, default=4.0,
                   help='One-Euro speed coefficient (per person height per '
                   'second); higher lags less (default: %(default)s)')
    v.add_argument('--d-cutoff', type=float, default=1.0,
                   help='One-Euro cutoff of the speed estimate, Hz '
                   '(default: %(default)s)')
    v.add_argument('--stabilize-dense', action='store_true',
                   help='stabilise depth (aligned frame to frame by a '
                   'least-squares scale and shift, then averaged) and '
                   'normals (averaged, renormalised) over time')
    v.add_argument('--stabilize-alpha', type=float, default=0.5,
                   help='weight of the new frame in that average '
                   '(default: %(default)s)')
    v.add_argument('--stabilize-matting', action='store_true',
                   help='smooth the matting alpha over time (flicker '
                   'averaged, movement followed)')
    v.add_argument('--stabilize-pointmap-scale', action='store_true',
                   help='bring the pointmaps to a temporally smooth scale; '
                   'each frame\'s measured and applied scale go to '
                   'pointmap/<name>/<frame>_scale.json')
    o = p.add_argument_group('outputs')
    o.add_argument('--kpt-thr', type=float, default=0.3,
                   help='keypoints below this score are not drawn '
                   '(default: %(default)s)')
    o.add_argument('--no-draw-bbox', action='store_true',
                   help='do not draw person boxes')
    o.add_argument('--no-save-pred', action='store_true',
                   help='do not write .json / .npy predictions')
    o.add_argument('--no-save-vis', action='store_true',
                   help='do not write .png / .mp4 visualisations')
    o.add_argument('--show', action='store_true',
                   help='show results in windows (q or Esc stops)')
    o.add_argument('--wait-time', type=int, default=1,
                   help='ms to wait per shown frame (default: %(default)s)')
    o.add_argument('--no-progress', action='store_true',
                   help='no progress bar (a sharded run: no progress '
                   'lines)')
    o.add_argument('--skeleton-style', choices=('mmpose', 'openpose'),
                   default='mmpose',
                   help='pose drawing: over the image in the layout\'s '
                   'colours (mmpose) or ControlNet-style on black (openpose) '
                   '(default: %(default)s)')
    o.add_argument('--export-format', nargs='+', default=[],
                   choices=('coco17', 'coco_wholebody', 'openpose'),
                   metavar='FORMAT',
                   help='also write the pose in these keypoint formats: '
                   'coco17, coco_wholebody, openpose (OpenPose JSON, as '
                   'ControlNet tools read) to OUT_DIR/pose_<format>/')
    o.add_argument('--mask-with', choices=('matting', 'seg'),
                   default=None,
                   help='what masks depth / normal / pointmap / albedo '
                   'outside the person (NaN in the arrays, black in the '
                   'images, soft with matting); default: matting when a '
                   'matting model runs, else seg when a seg model runs')
    o.add_argument('--background', default=None, metavar='COLOR|IMAGE',
                   help='what the matting composite puts behind the person: '
                   'a colour (green, white, #RRGGBB, R,G,B) or an image '
                   'file (default: green screen)')
    o.add_argument('--alpha-bits', type=int, choices=(8, 16), default=8,
                   help='bit depth of the matting alpha PNGs (default: '
                   '%(default)s)')
    o.add_argument('--save-mask', action='store_true',
                   help='write the person foreground from seg: OUT_DIR/mask/'
                   '<name>.png (soft mask), <name>_rgba.png (cut-out) and '
                   '<name>_person<i>.png per pose box')
    c = p.add_argument_group('at scale (sharded, resumable runs)')
    c.add_argument('--launcher', choices=LAUNCHERS, default='none',
                   help='how the processes were started: none (one '
                   'process), pytorch (torchrun, tools/dist_infer.sh) or '
                   'slurm (srun, tools/slurm_infer.sh) (default: '
                   '%(default)s)')
    c.add_argument('--overwrite', action='store_true',
                   help='redo every input of a sharded run (by default a '
                   'run over the same --out-dir skips the inputs already '
                   'done)')
    c.add_argument('--coco-results', metavar='FILE', default=None,
                   help='at the end, write the COCO keypoint results of '
                   'all images (COCO-17 layout; for pycocotools\' loadRes '
                   'and COCOeval)')
    c.add_argument('--rank-timeout', type=float, default=None, metavar='S',
                   help='seconds without a heartbeat after which rank 0 '
                   'counts a rank as lost and stops, naming it and its '
                   'in-flight inputs (re-running resumes); it measures '
                   f'silence, not work (default: ${RANK_TIMEOUT_ENV}, else '
                   '600)')
    c.add_argument('--progress-interval', type=float, default=30.0,
                   metavar='S', help='seconds between the one-line progress '
                   'summaries of a sharded run (rank 0; a last one when its '
                   'share is done), 0 for none (default: %(default)s)')
    from sapiens_mm.cli import add_debug_argument
    add_debug_argument(p)
    p.add_argument('--verbose', action='store_true',
                   help='also show the warnings of the OpenMMLab packages '
                   '(deprecations and notes that do not concern the run; '
                   'hidden by default)')
    return p


def models_from_args(args: argparse.Namespace) -> dict:
    """``{task: spec}`` from the model options.

    Raises:
        ValueError: No model, or two models for one task.
    """
    from sapiens_mm.apis.inferencers import task_of_checkpoint
    models = model_options(args)
    for ckpt in args.checkpoints:
        task = task_of_checkpoint(ckpt)
        if task in models:
            given = models[task]['checkpoint'] or models[task]['config']
            raise ValueError(f'Two {task} models given ({ckpt} and '
                             f'{given}); keep one.')
        models[task] = dict(config=None, checkpoint=ckpt)
    missing = [t for t in (args.tasks or ()) if t not in models]
    if missing:
        flags = ' / '.join(f'--{t} CKPT' for t in missing)
        raise ValueError(
            f'--tasks {" ".join(args.tasks)} asks for {", ".join(missing)} '
            f'but no {" / ".join(missing)} model was given: add {flags} '
            '(or the file to --checkpoints), or drop it from --tasks.')
    return models


def is_sharded(args: argparse.Namespace) -> bool:
    """Whether the parsed command runs sharded (:func:`main_sharded`): a
    list file or glob input, a launcher, ``--coco-results``,
    ``--overwrite``, or an ``--out-dir`` that holds a sharded run."""
    return (args.launcher != 'none' or args.coco_results is not None
            or args.overwrite
            or any(is_list_file(x) or is_glob(x) for x in args.inputs)
            or osp.isfile(osp.join(args.out_dir, MANIFEST_DIR, 'run.json')))


def _models(args: argparse.Namespace) -> dict:
    """:func:`models_from_args`, and ``--trust-pt2`` recorded for them."""
    models = models_from_args(args)
    if args.trust_pt2:
        pt2 = [spec['checkpoint'] for spec in models.values()
               if str(spec['checkpoint'] or '').lower().endswith('.pt2')]
        if not pt2:
            raise ValueError('--trust-pt2 was given, but no .pt2 model.')
        from sapiens_mm.deploy import trust_exported_program
        for path in pt2:
            trust_exported_program(path)
    return models


def _build_inferencer(args: argparse.Namespace, models: dict,
                      device: Optional[str]):
    """The inferencer of the parsed options, on ``device``; on a CPU this
    program's ``malloc`` then keeps freed memory for reuse (logged; see
    :func:`sapiens_mm.utils.cpu_allocator.keep_freed_memory`)."""
    from sapiens_mm.apis.inferencers import SapiensInferencer
    from sapiens_mm.utils.cpu_allocator import keep_freed_memory
    inferencer = SapiensInferencer(
        models=models,
        tasks=args.tasks,
        device=device,
        batch_size=args.batch_size,
        dtype=args.dtype,
        compile=args.compile,
        detector=args.detector,
        det_model=args.det_model,
        det_weights=args.det_weights,
        det_cat_ids=args.det_cat_ids,
        bbox_thr=args.bbox_thr,
        nms_thr=args.nms_thr,
        kpt_thr=args.kpt_thr,
        track=not args.no_track,
        smooth=not args.no_smooth,
        det_interval=args.det_interval,
        tracker_cfg=dict(min_cutoff=args.min_cutoff, beta=args.beta,
                         d_cutoff=args.d_cutoff),
        stabilize_dense=args.stabilize_dense,
        stabilize_alpha=args.stabilize_alpha,
        mask_with=args.mask_with,
        stabilize_matting=args.stabilize_matting,
        stabilize_pointmap_scale=args.stabilize_pointmap_scale,
        whole_image_fallback=not args.no_whole_image_fallback)
    if inferencer.device.type == 'cpu':  # the device it resolved
        keep_freed_memory()  # a whole program tunes its own process
    return inferencer


def main(argv: Optional[Sequence[str]] = None,
         prog: Optional[str] = None) -> Union[List[dict], dict, None]:
    """Parse ``argv``, run the inferencer, report what was written.

    Returns:
        The per-frame results without their arrays (``input``, ``name``,
        ``frame_index``, ``pred_files``, ``vis_files``, ``nonfinite``), also
        written to ``OUT_DIR/outputs.json``; for a sharded run
        (:func:`is_sharded`), what :func:`main_sharded` returns.

    Raises:
        RuntimeError: No input could be processed (each was skipped).
    """
    args = build_parser(prog).parse_args(argv)
    from sapiens_mm.cli.common import third_party_warnings
    with third_party_warnings(args.verbose):
        sharded = is_sharded(args)
        # what needs no model first (a second, not the seconds torch and the
        # OpenMMLab packages take to load)
        preflight(args, sharded)
        from sapiens_mm import register_all_modules
        register_all_modules()
        if sharded:
            return main_sharded(args)
        return _run(args)


def _summary_entry(result: dict) -> dict:
    """What ``outputs.json`` records of one result: its input and files."""
    return {k: result[k] for k in ('input', 'name', 'frame_index',
                                   'pred_files', 'vis_files', 'nonfinite')}


def _write_summary(summary: List[dict], out_dir: str) -> None:
    """``OUT_DIR/outputs.json``: which input each output came from (names
    made unique)."""
    from sapiens_mm.engine.fileio import atomic_write
    atomic_write(json.dumps(summary, indent=1),
                 osp.join(out_dir, 'outputs.json'))


def _run(args: argparse.Namespace) -> List[dict]:
    """:func:`main` after parsing, in one process."""
    from mmengine.logging import print_log

    from sapiens_mm.zoo import ConfigMismatchError
    bboxes = load_bboxes(args.bboxes)
    models = _models(args)
    save = not (args.no_save_pred and args.no_save_vis)
    if save:  # before any model is built or run
        from sapiens_mm.engine.fileio import ensure_writable_dir
        ensure_writable_dir(args.out_dir, 'output folder (--out-dir)')
    try:
        inferencer = _build_inferencer(args, models, args.device)
    except ConfigMismatchError as e:
        raise ValueError(e.explain(
            f'--{e.task}-config CFG --{e.task} {e.checkpoint}')) from None
    inputs = [int(x) if x.isdigit() and not osp.exists(x) else x
              for x in args.inputs]
    summary = []
    stream = inferencer.stream(
        inputs,
        out_dir=args.out_dir,
        bboxes=bboxes,
        no_save_pred=args.no_save_pred,
        no_save_vis=args.no_save_vis,
        show=args.show,
        wait_time=args.wait_time,
        draw_bbox=not args.no_draw_bbox,
        max_frames=args.max_frames,
        show_progress=not args.no_progress,
        skeleton_style=args.skeleton_style,
        export_formats=args.export_format,
        save_mask=args.save_mask,
        background=args.background,
        alpha_bits=args.alpha_bits)
    try:
        for result in stream:
            summary.append(_summary_entry(result))
    except KeyboardInterrupt as stop:
        # Ctrl-C: keep and list what was written, then exit 130 (run_cli)
        stream.close()  # when it came between two results: close the videos
        summary += [_summary_entry(r) for r in getattr(stop, 'results', ())]
        total = getattr(stop, 'total', None)
        if summary and save:
            _write_summary(summary, args.out_dir)
        kept = f'kept {len(summary)}' + (f' of {total}' if total else '')
        where = (f'; their files (each video up to its last frame, playable) '
                 f'and outputs.json are in {args.out_dir}'
                 if summary and save else '')
        print_log(f'Stopped by Ctrl-C: {kept} frames (an image counts as '
                  f'one){where}.', logger='current', level=30)
        raise
    print_log(
        f'Sapiens {", ".join(inferencer.tasks)}: {len(summary)} image(s) / '
        f'frame(s) processed, {len(inferencer.skipped)} skipped; outputs in '
        f'{args.out_dir}', logger='current')
    if summary and save:
        _write_summary(summary, args.out_dir)
    flagged = [r for r in summary if r['nonfinite']]
    if flagged:
        print_log(f'{len(flagged)} image(s) / frame(s) had non-finite model '
                  'outputs (see "nonfinite" in outputs.json).',
                  logger='current', level=30)
    if not summary:
        reasons = '; '.join(f'{name}: {why}'
                            for name, why in inferencer.skipped[:3])
        raise RuntimeError(
            f'No input could be processed ({len(inferencer.skipped)} '
            f'skipped{": " + reasons if reasons else ""}'
            f'{"; ..." if len(inferencer.skipped) > 3 else ""}).')
    return summary


def main_sharded(args: argparse.Namespace) -> Optional[dict]:
    """The sharded, resumable run of a parsed command
    (:func:`~sapiens_mm.apis.inferencers.infer_sharded`): this process's
    share of the inputs, then on rank 0 the merged manifest, the summary
    and ``--coco-results``.

    Returns:
        The summary (``summary.json``) on rank 0, None on the other ranks.

    Raises:
        SystemExit: With :data:`~sapiens_mm.engine.sharded.REQUEUE_EXIT_CODE`
            when SIGTERM stopped the run (the manifests are flushed; run the
            same command again to resume).
        ValueError: An option a sharded run cannot take, or an ``--out-dir``
            holding a run with other options (without ``--overwrite``).
    """
    if args.coco_results:  # before any work: it is written at the end
        check_results_path(args.coco_results, '--coco-results')
    rank_timeout = resolve_rank_timeout(args.rank_timeout, '--rank-timeout')
    from mmengine.logging import print_log

    from sapiens_mm.apis.inferencers import infer_sharded, write_coco_keypoint_results
    from sapiens_mm.engine.fileio import ensure_writable_dir
    from sapiens_mm.engine.sharded import (
        REQUEUE_EXIT_CODE,
        RunStopped,
        init_distributed,
        local_device,
    )
    if args.show:
        raise ValueError('--show is for one process; a sharded run writes '
                         'its outputs to --out-dir.')
    if args.no_save_pred and args.no_save_vis:
        raise ValueError('A sharded run writes its outputs to --out-dir: '
                         'drop --no-save-pred or --no-save-vis.')
    if args.coco_results and args.no_save_pred:
        raise ValueError('--coco-results is made from the pose .json files: '
                         'drop --no-save-pred.')
    bboxes = load_bboxes(args.bboxes)
    if bboxes is not None and len(bboxes) and isinstance(
            bboxes[0], (list, tuple)) and bboxes[0] and isinstance(
                bboxes[0][0], (list, tuple)):
        raise ValueError('In a sharded run --bboxes gives the boxes of every '
                         'input: [[x1, y1, x2, y2], ...], not one list per '
                         'input.')
    models = _models(args)
    ensure_writable_dir(args.out_dir, 'output folder (--out-dir)')
    rank, world_size = init_distributed(args.launcher)
    device = args.device
    if args.launcher != 'none' and device in (None, 'cuda'):
        device = local_device()  # one process per GPU
    inferencer = _build_inferencer(args, models, device)
    stream_kwargs = dict(
        bboxes=bboxes, no_save_pred=args.no_save_pred,
        no_save_vis=args.no_save_vis, draw_bbox=not args.no_draw_bbox,
        max_frames=args.max_frames, skeleton_style=args.skeleton_style,
        export_formats=args.export_format, save_mask=args.save_mask,
        background=args.background, alpha_bits=args.alpha_bits)
    # What decides the output files: a resumed run must use the same.
    options = dict(
        models={t: models[t] for t in sorted(models)},
        tasks=list(inferencer.tasks), dtype=args.dtype,
        detector=[args.detector, args.det_model, args.det_weights,
                  args.det_cat_ids, args.bbox_thr, args.nms_thr],
        kpt_thr=args.kpt_thr, track=[not args.no_track, not args.no_smooth,
                                     args.det_interval, args.min_cutoff,
                                     args.beta, args.d_cutoff],
        stabilize=[args.stabilize_dense, args.stabilize_alpha,
                   args.stabilize_matting, args.stabilize_pointmap_scale],
        mask_with=args.mask_with,
        **{k: v for k, v in stream_kwargs.items()})
    try:
        summary = infer_sharded(inferencer, args.inputs, args.out_dir,
                                options, rank, world_size, args.overwrite,
                                0 if args.no_progress else
                                args.progress_interval, rank_timeout,
                                **stream_kwargs)
        if summary is not None and args.coco_results:
            n = write_coco_keypoint_results(args.out_dir, args.coco_results)
            print_log(f'{args.coco_results}: {n} COCO keypoint results.',
                      logger='current')
        return summary
    except RunStopped:
        print_log(f'Rank {rank} stopped by SIGTERM; its manifest is flushed. '
                  f'Exit code {REQUEUE_EXIT_CODE}: run the same command '
                  'again (or requeue the job) to resume.', logger='current',
                  level=30)
        raise SystemExit(REQUEUE_EXIT_CODE) from None
    finally:
        import torch.distributed as dist
        if dist.is_initialized():
            dist.destroy_process_group()


def cli(argv: Optional[Sequence[str]] = None,
        prog: Optional[str] = None) -> List[dict]:
    """:func:`main` for a command line: a user error ends with one line and
    exit code 1 (the traceback with ``--debug``)."""
    from sapiens_mm.cli import run_cli
    return run_cli(lambda a: main(a, prog), argv, prog)
