"""The values every stage shares, with no OpenCL import: configs, problems, spaces and settings,
expressions, device.* values, measurement records, errors and paths."""
