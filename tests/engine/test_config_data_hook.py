"""Checkpoints carry their config as data (ConfigDataHook): written by
mmengine's Runner, read back without executing anything."""
import torch
from mmengine.config import Config
from mmengine.model import BaseModel
from mmengine.runner import Runner

from sapiens_mm.checkpoint import load_file
from sapiens_mm.engine import ConfigDataHook
from sapiens_mm.engine.hooks import CONFIG_DATA_KEY


class _Tiny(BaseModel):

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(2, 1)

    def forward(self, inputs, data_samples=None, mode='tensor'):
        out = self.fc(torch.stack(inputs) if isinstance(inputs, list)
                      else inputs)
        return dict(loss=out.pow(2).mean()) if mode == 'loss' else out


def test_runner_checkpoints_carry_the_config_as_data(tmp_path):
    cfg = Config(dict(
        model=dict(type='X', head=dict(channels=32,
                                       deconv_out_channels=(32, 32))),
        pipeline=[dict(type='TopdownAffine', input_size=(144, 192))],
        work_dir=str(tmp_path)))
    # one training iteration; mmengine's CheckpointHook saves iter_1.pth
    data = [dict(inputs=torch.ones(2))] * 2
    runner = Runner(
        model=_Tiny(), work_dir=str(tmp_path), cfg=cfg,
        train_dataloader=torch.utils.data.DataLoader(
            data, batch_size=2, collate_fn=lambda b: dict(
                inputs=[x['inputs'] for x in b])),
        optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.1)),
        train_cfg=dict(by_epoch=False, max_iters=1),
        default_hooks=dict(checkpoint=dict(type='CheckpointHook',
                                           by_epoch=False, interval=1)),
        custom_hooks=[ConfigDataHook()])
    runner.train()
    ckpt = load_file(str(tmp_path / 'iter_1.pth'))
    data = ckpt['meta'][CONFIG_DATA_KEY]
    # plain data: dicts, lists, strings, numbers; tuples tagged
    assert data['model']['head']['deconv_out_channels'] == {
        '__tuple__': [32, 32]}
    assert data['pipeline'][0] == dict(
        type='TopdownAffine', input_size={'__tuple__': [144, 192]})
    # mmengine's own Python-text copy is still there, and is not what we
    # read
    assert isinstance(ckpt['meta']['cfg'], str)


def test_hook_leaves_checkpoints_of_runners_without_config_alone():
    class _Runner:
        cfg = None

    checkpoint = dict(meta=dict(epoch=1))
    ConfigDataHook().before_save_checkpoint(_Runner(), checkpoint)
    assert checkpoint == dict(meta=dict(epoch=1))


def test_config_that_is_not_data_is_skipped():
    class _Runner:
        cfg = Config(dict(model=dict(type=torch.nn.Linear)))

    checkpoint = dict(meta={})
    ConfigDataHook().before_save_checkpoint(_Runner(), checkpoint)
    assert CONFIG_DATA_KEY not in checkpoint['meta']
