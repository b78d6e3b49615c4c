"""Serves the digits CNN written by `cargo run -p catml --example digits_cnn -- --export DIR`
with onnxruntime and checks it against CatML: python serve_digits.py DIR"""
import json, sys
import numpy as np
import onnxruntime as ort

held = json.load(open(f"{sys.argv[1]}/digits_heldout.json"))
x = np.array(held["x"], dtype=np.float32).reshape(held["shape"])
opts = ort.SessionOptions()
opts.log_severity_level = 3  # the parameters are initializers that stay overridable inputs
model = ort.InferenceSession(f"{sys.argv[1]}/digits_cnn.onnx", opts, providers=["CPUExecutionProvider"])
(logits,) = model.run(None, {"x": x})
accuracy = float((logits.argmax(axis=1) == np.array(held["labels"])).mean())
gap = float(np.abs(logits - np.array(held["logits"]).reshape(logits.shape)).max())
print(f"held-out accuracy: onnxruntime {accuracy:.4f}, CatML {held['accuracy']:.4f}; "
      f"largest logit difference {gap:.2e}")
sys.exit(0 if accuracy == held["accuracy"] else 1)
