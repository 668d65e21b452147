"""The device side: opening devices, building, verifying and timing settings, in this process, in
an isolated worker process or on a farm of workers; every backend declares what it can do."""
