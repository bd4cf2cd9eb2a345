"""Names of a sharded run (:mod:`sapiens_mm.engine.sharded`) that command
lines need to build their parsers and to recognise an output folder, kept
here so that ``--help`` imports neither torch nor the OpenMMLab packages."""

__all__ = ['LAUNCHERS', 'MANIFEST_DIR', 'MERGED_NAME', 'SUMMARY_NAME',
           'RUN_NAME']

#: The ways a sharded run's processes are started (mmengine's launchers).
LAUNCHERS = ('none', 'pytorch', 'slurm')
#: The folder of a run's per-rank manifests and run record, in --out-dir.
MANIFEST_DIR = 'manifests'
#: The merged manifest, in --out-dir.
MERGED_NAME = 'manifest.jsonl'
#: The run's summary, in --out-dir.
SUMMARY_NAME = 'summary.json'
#: The run record (its options), in the manifest folder.
RUN_NAME = 'run.json'
