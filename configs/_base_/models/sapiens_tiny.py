# Tiny Sapiens-shaped encoder (64 wide, 2 layers) for tests and quick runs.
# Randomly initialised: no pretrained checkpoint exists for it.
sapiens_arch = 'sapiens_tiny'
sapiens_embed_dims = 64
sapiens_num_layers = 2
sapiens_pretrained = None
