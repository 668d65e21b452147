"""Write the graph-only ONNX files the tests check the bundled network tables with
(tests/data/networks/<name>.onnx, read by tests/test_net_tables.py through cltune's ONNX reader).

Each reference model (cltune.net.torch_layers.reference_models: torchvision's resnet18,
mobilenet_v2 and vgg16, and MobileNet v1 from its paper) is exported as a user's export would be:
eval mode, torch.onnx.export's TorchScript exporter (BatchNorm folded into the convs), its default
opset. Then every initializer of more than 16 elements becomes a typed graph input: its name, dtype
and dims stay, its values go. The nodes, their attributes and the small constants (Clip bounds,
Reshape targets) are the export's own, so the file reads as the full model; onnx.checker accepts it.
Needs torch and torchvision (pip install -e '.[test,parity]'); run it once when a model definition
or the exporter changes, and commit the files. `pytest -m parity` checks a fresh export against them.

    python scripts/make_net_fixtures.py [NAME ...]
"""

import sys
from pathlib import Path

import onnx

from cltune.net.torch_layers import fixture, reference_models

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "networks"

if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    for name in sys.argv[1:] or list(reference_models()):
        model = fixture(name)
        onnx.checker.check_model(model, full_check=True)
        path = OUT / f"{name}.onnx"
        onnx.save(model, str(path))
        print(f"{name}: {len(model.graph.node)} nodes, {path.stat().st_size / 1024:.1f} KB -> {path}")
