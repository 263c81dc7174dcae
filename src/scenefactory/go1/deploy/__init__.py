"""Deployment of Go1 policies: ONNX export (torch side) and a torch-free runner for robot interfaces."""
