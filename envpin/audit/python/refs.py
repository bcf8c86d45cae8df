"""What the documentation of the script rules shares: the start of their examples and the pages they cite. The
rules themselves are in their families' modules (envpin.audit.rules.script_families)."""

#: The start of most examples: a script that imports TensorFlow as the rules' texts name it.
HEAD = "import tensorflow as tf\n\n"
FWR = (
    "NVIDIA/framework-reproducibility: TensorFlow determinism",
    "https://github.com/NVIDIA/framework-reproducibility/blob/master/doc/d9m/tensorflow.md",
)
STATUS = (
    "NVIDIA/framework-reproducibility: TensorFlow determinism status",
    "https://github.com/NVIDIA/framework-reproducibility/blob/master/doc/d9m/tensorflow_status.md",
)
TABLE = (
    "The recipe table (envpin/data/recipes.json)",
    "https://github.com/envpin/envpin/blob/main/envpin/data/recipes.json",
)
SCRIPTS = ("Python training scripts", "#python-training-scripts")
