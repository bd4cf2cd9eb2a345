"""The per-frame outputs of :class:`~.sapiens_inferencer.SapiensInferencer`:
the drawings (:meth:`~FrameOutputsMixin.visualize`), the result dict and
its files (:meth:`~FrameOutputsMixin.postprocess`), the person foreground
files, and the notices said once per call (fallbacks, thresholds)."""
import os.path as osp
from typing import Dict, Optional, Sequence

import numpy as np
from mmengine.logging import print_log

from sapiens_mm.datasets.keypoint_formats import EXPORT_FORMATS, convert_pose_record
from sapiens_mm.utils.foreground import person_cutouts, rgba_cutout, soft_foreground
from sapiens_mm.utils.pointcloud import write_ply
from sapiens_mm.visualization import SKELETON_STYLES, SkeletonStyle

from .dense_inferencer import write_matting_files
from .utils.display import show_images
from .utils.sources import Frame
from .utils.writers import VideoWriters, write_json, write_npy, write_png

__all__ = ['FrameOutputsMixin']


class FrameOutputsMixin:
    """Visualisation, files and notices of one frame of the multi-task
    inferencer. Mixed into :class:`~.sapiens_inferencer.SapiensInferencer`,
    whose attributes they use (``task_inferencers``, ``mask_with``,
    ``kpt_thr``, ``notices``)."""

    def _check_output_options(self, skeleton_style: str,
                              export_formats: Sequence[str],
                              save_mask: bool) -> None:
        if skeleton_style not in SKELETON_STYLES:
            raise ValueError(f'skeleton_style must be one of '
                             f'{", ".join(SKELETON_STYLES)}, got '
                             f'{skeleton_style!r}.')
        if isinstance(export_formats, str):
            raise TypeError('export_formats is a list of formats, e.g. '
                            f'[{export_formats!r}].')
        unknown = [f for f in export_formats if f not in EXPORT_FORMATS]
        if unknown:
            raise ValueError(f'Unknown export format(s) {unknown}; choose '
                             f'from {", ".join(EXPORT_FORMATS)}.')
        if export_formats and 'pose' not in self.task_inferencers:
            raise ValueError('Exporting keypoint formats needs a pose model '
                             '(give --pose or a pose checkpoint).')
        if save_mask and 'seg' not in self.task_inferencers:
            raise ValueError('The foreground mask (save_mask / --save-mask) '
                             'comes from the segmentation: give a seg model '
                             'too (--seg or a seg checkpoint).')

    def _say_once(self, key: str, message: str) -> None:
        """Log ``message`` and keep it in ``notices`` (``{key: message}``),
        unless this call has said ``key`` already."""
        if key not in self.notices:
            self.notices[key] = message
            print_log(message + ' (Said once per run.)', logger='current',
                      level=30)

    def _pose_notices(self, where: str, pose: dict) -> None:
        """Say the fallbacks of one frame's pose: the whole image used as
        the person box, no person, every keypoint below ``kpt_thr``."""
        detector = self.detector if pose['bbox_source'] == 'whole_image' \
            else None  # the user's boxes: no detector to build or name
        if detector is not None:
            self._say_once(
                'whole_image',
                f'{where}: the person detector ({type(detector).__name__}) '
                'found no one, so pose ran on the whole image as one person '
                '(its skeleton may be drawn on no one). whole_image_fallback='
                'False (CLI: --no-whole-image-fallback) leaves such images '
                'without pose; bbox_source in the pose JSON says which box '
                'each image used.')
        elif pose['bbox_source'] == 'none':
            self._say_once(
                'no_person', f'{where}: the person detector found no one: no '
                'pose for this image (whole_image_fallback is off).')
        scores = np.asarray(pose['keypoint_scores'], np.float32)
        finite = scores[np.isfinite(scores)]
        if finite.size and not (finite >= self.kpt_thr).any():
            # about half the keypoints score at least the median
            suggest = max(0.01, np.floor(np.median(finite) * 100) / 100)
            self._say_once(
                'kpt_thr',
                f'{where}: every keypoint scored below the drawing threshold '
                f'kpt_thr={self.kpt_thr:g} (highest {finite.max():.2f}), so '
                f'no keypoint is drawn; kpt_thr={suggest:g} (CLI: --kpt-thr '
                f'{suggest:g}) draws about half of them. Scores this low '
                'mean the model is unsure: an untrained model, or no person '
                'in the box.')

    def person_alpha(self, pred: dict) -> Optional[np.ndarray]:
        """(H, W) float32 alpha of the person in one frame's prediction:
        the matting alpha or the seg foreground (labels > 0, as 0 / 1),
        as ``mask_with`` picks; None without either."""
        if self.mask_with == 'matting' and 'matting' in pred:
            return pred['matting'][..., 3]
        if self.mask_with == 'seg' and 'seg' in pred:
            return (pred['seg'] > 0).astype(np.float32)
        return None

    def visualize(self, frame: Frame, pred: dict,
                  draw_bbox: bool = True,
                  skeleton_style: SkeletonStyle = 'mmpose',
                  background=None) -> Dict[str, np.ndarray]:
        """BGR visualisation of each task's prediction for one frame: the
        pose in ``skeleton_style``, the matte composited onto
        ``background`` (green screen when None), depth / normals /
        pointmaps / albedo outside the person (``mask_with``) black,
        blended with the matting alpha where it is soft (the picture; the
        key panels beside it stay as drawn)."""
        alpha = self.person_alpha(pred)
        fg = None if alpha is None else alpha >= 0.5
        vis = {}
        for task, ti in self.task_inferencers.items():
            if task == 'pose':
                vis[task] = ti.draw(frame.image, pred['pose'], draw_bbox,
                                    skeleton_style)
            elif task == 'seg':
                vis[task] = ti.draw(frame.image, pred['seg'])
            elif task == 'matting':
                vis[task] = ti.draw(frame.image, pred['matting'],
                                    background=background)
            else:
                vis[task] = ti.draw(frame.image, pred[task], fg)
                if alpha is not None:  # the picture, not its key panel
                    h, w = alpha.shape
                    vis[task][:h, :w] = np.rint(
                        vis[task][:h, :w] * alpha[..., None]).astype(np.uint8)
        return vis

    def postprocess(self, frame: Frame, pred: dict, videos: VideoWriters,
                    opts: dict) -> dict:
        """Write files, show and assemble the result dict of one frame."""
        src = frame.source
        video = src.kind in ('video', 'webcam')
        stem = (f'{src.name}/{frame.frame_index:06d}' if video else src.name)
        result = dict(
            input=src.path if src.path is not None else src.name,
            name=src.name,
            frame_index=frame.frame_index,
            img_shape=tuple(frame.image.shape[:2]),
            predictions={t: pred[t]
                         for t in self.tasks},
            pred_files={},
            vis_files={},
            nonfinite=dict(pred.get('nonfinite') or {}))
        if 'pointmap_scale' in pred:
            result['predictions']['pointmap_scale'] = pred['pointmap_scale']
        if result['nonfinite']:
            where = result['input'] if frame.frame_index is None else \
                f'{result["input"]} frame {frame.frame_index}'
            outputs = ', '.join(f'{t} output ({n} values)'
                                for t, n in result['nonfinite'].items())
            print_log(
                f'{where}: non-finite (NaN / inf) values in the {outputs}; '
                'the model weights or the input may be corrupt.',
                logger='current', level=30)
        if 'pose' in pred:
            where = result['input'] if frame.frame_index is None else \
                f'{result["input"]} frame {frame.frame_index}'
            self._pose_notices(where, pred['pose'])
        out_dir = opts['out_dir']
        if opts['save_pred']:
            for task in self.tasks:
                if task == 'pose':
                    path = osp.join(out_dir, 'pose', stem + '.json')
                    record = self.task_inferencers['pose'].to_json(
                        result['input'], frame.frame_index,
                        result['img_shape'], pred['pose'])
                    write_json(path, record)
                    for fmt in opts['export_formats']:
                        fmt_path = osp.join(out_dir, f'pose_{fmt}',
                                            stem + '.json')
                        write_json(fmt_path, convert_pose_record(record, fmt))
                        result['pred_files'][f'pose_{fmt}'] = fmt_path
                else:
                    path = osp.join(out_dir, task, stem + '.npy')
                    write_npy(path, pred[task])
                    if task == 'pointmap':  # + the coloured point cloud
                        ply = osp.join(out_dir, task, stem + '.ply')
                        write_ply(ply, pred[task],
                                  colors=frame.image[..., ::-1])
                        result['pred_files']['pointmap_ply'] = ply
                        if 'pointmap_scale' in pred:
                            scale = osp.join(out_dir, task,
                                             stem + '_scale.json')
                            write_json(scale, pred['pointmap_scale'])
                            result['pred_files']['pointmap_scale'] = scale
                    elif task == 'matting':  # alpha PNG, RGBA cut-out
                        result['pred_files'].update(write_matting_files(
                            osp.join(out_dir, task, stem), pred[task],
                            opts['alpha_bits']))
                result['pred_files'][task] = path
        if opts['save_mask']:
            self._foreground(frame, pred, result, stem, out_dir)
        if opts['save_vis'] or opts['return_vis'] or opts['show']:
            vis = self.visualize(frame, pred, opts['draw_bbox'],
                                 opts['skeleton_style'],
                                 opts['background'])
            if opts['save_vis']:
                for task, img in vis.items():
                    if video:
                        path = osp.join(out_dir, task, src.name + '.mp4')
                        videos.write(id(src), task, path, img, src.fps)
                    else:
                        path = osp.join(out_dir, task, stem + '.png')
                        write_png(path, img)
                    result['vis_files'][task] = path
            if opts['return_vis']:
                result['visualization'] = vis
            if opts['show']:
                show_images(vis, max(1, int(opts['wait_time'])))
        if opts['return_datasamples']:
            result['datasamples'] = pred['samples']
        return result

    @staticmethod
    def _foreground(frame: Frame, pred: dict, result: dict, stem: str,
                    out_dir: Optional[str]) -> None:
        """The soft person mask (into the result) and its files."""
        logits = pred['samples']['seg'].seg_logits.data.float().cpu().numpy()
        alpha = soft_foreground(logits)
        result['predictions']['foreground'] = alpha
        if out_dir is None:
            return
        base = osp.join(out_dir, 'mask', stem)
        files = {'mask': base + '.png', 'mask_rgba': base + '_rgba.png'}
        write_png(files['mask'], np.round(alpha * 255).astype(np.uint8))
        write_png(files['mask_rgba'], rgba_cutout(frame.image, alpha))
        boxes = pred['pose']['bboxes'] if 'pose' in pred else []
        for i, (cut, _) in enumerate(person_cutouts(frame.image, alpha,
                                                    boxes)):
            files[f'mask_person{i}'] = f'{base}_person{i}.png'
            write_png(files[f'mask_person{i}'], cut)
        result['pred_files'].update(files)
