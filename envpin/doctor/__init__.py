"""`envpin doctor`: can this host run an NGC TensorFlow image? Answered before any multi-GB pull.

`readings`: what is observed on the host (Docker, NVIDIA container runtime / CDI, driver, GPUs).
`diagnosis`: what those readings mean for one image (will run, will not, cannot tell), and `run`, which
resolves the image, reads the host and diagnoses.
"""
