"""The speed settings a test gives what it builds outside run.py: those of a run on the CPU
(textcore/device_settings.py), so that a module, datamodule or callback built here runs as it would in a CPU run."""
from textcore.device_settings import Device, device_defaults

CPU_RUN = device_defaults(Device("cpu"))
CHUNKS = CPU_RUN["encoder_chunk_tokens"]  # a module's chunk_tokens
LOADER = {key.split(".", 1)[1]: value for key, value in CPU_RUN.items() if key.startswith("loader.")}
KMEANS = CPU_RUN["kmeans_backend"]
