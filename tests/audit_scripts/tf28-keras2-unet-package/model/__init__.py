"""The segmentation network."""
