"""Reading the ship images and their run-length masks."""
