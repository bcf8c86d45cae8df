"""What envpin knows: the catalog of NGC and stock TensorFlow images (with the user's image-facts cache
merged in), the determinism recipes per TensorFlow version, what an image config declares, and
`catalog sync`, which reads those facts from registries."""
