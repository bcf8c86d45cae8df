"""Images: the engines that build them (Docker, podman) behind one interface, the build itself, the base
image checked against the plan, the machine-local record of what was built, and probing a built image."""
