"""What runs inside a measured process: the worker's commands, its clients and streams, the scale processes."""
