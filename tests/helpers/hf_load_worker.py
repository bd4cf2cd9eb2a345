"""A rank of a distributed job whose mmengine Runner loads ``load_from``
from an ``hf://`` URL (the scheme ``import sapiens_mm`` registers), on CPU
(gloo). Run by ``torchrun``:

    torchrun ... hf_load_worker.py URL OUT_DIR

On success each rank writes ``OUT_DIR/rank<RANK>.json`` (the loaded weight
and the checkpoint path its cache gave); an error is one line on stderr and
exit code 1 (``sapiens_mm.cli.run_cli``).
"""
import json
import os
import sys

import torch
import torch.distributed as dist
from mmengine.model import BaseModel
from mmengine.runner import Runner

from sapiens_mm.cli import run_cli


class Linear(BaseModel):

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, inputs, data_samples=None, mode='tensor'):
        return self.fc(inputs)


def main(argv):
    url, out_dir = argv
    import sapiens_mm  # noqa: F401  (the hf:// checkpoint scheme)
    from sapiens_mm.zoo.hub import fetch_url
    dist.init_process_group('gloo')  # mmengine's init_dist wants CUDA
    rank = dist.get_rank()
    runner = Runner(model=Linear(), work_dir=os.path.join(out_dir, 'work'),
                    load_from=url, launcher='pytorch',
                    cfg=dict(model_wrapper_cfg=dict(
                        type='MMDistributedDataParallel', device_ids=None)))
    runner.load_or_resume()
    model = getattr(runner.model, 'module', runner.model)
    with open(os.path.join(out_dir, f'rank{rank}.json'), 'w') as f:
        json.dump({'weight': model.fc.weight.tolist(),
                   'path': fetch_url(url, local_only=True)}, f)
    dist.destroy_process_group()


if __name__ == '__main__':
    run_cli(main, sys.argv[1:], 'hf_load_worker')
