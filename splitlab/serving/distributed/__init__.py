"""The distributed back end: real worker processes joined with torch.distributed, wall clocks."""
