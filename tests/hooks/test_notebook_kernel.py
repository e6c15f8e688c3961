"""Tests for hooks/notebook_kernel.py: the notebook's kernel is started on IPC sockets, so it
never prints "Kernel is running over TCP without encryption"."""

from hooks import notebook_kernel


def test_nbconvert_reads_the_ipc_transport(tmp_path, monkeypatch):
    from nbconvert.nbconvertapp import NbConvertApp

    monkeypatch.setattr(notebook_kernel, "FOLDER", tmp_path / "jupyter")
    monkeypatch.setenv("JUPYTER_CONFIG_PATH", "")
    notebook_kernel.on_config(None)
    app = NbConvertApp()
    app.load_config_file()  # as mkdocs-jupyter does before converting a notebook
    assert app.config.KernelManager.transport == "ipc"
    assert app.config.KernelManager.ip == str(tmp_path / "jupyter" / "kernel")
