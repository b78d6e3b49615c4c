"""`catml.train`: the example spec run from Python, as `catml train` runs it."""

import json
import pathlib

import pytest

import catml

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


def spec_in(tmp_path, edit=lambda t: t):
    """The example spec with its data and modules named by absolute path, outputs in tmp_path."""
    text = (EXAMPLES / "triangle.toml").read_text()
    data = EXAMPLES / "triangle"
    text = text.replace('"triangle/out/', f'"{tmp_path}/out/').replace('"triangle/', f'"{data}/')
    path = tmp_path / "spec.toml"
    path.write_text(edit(text.replace("epochs = 25", "epochs = 2")))
    return path


def test_train_runs_a_spec_and_writes_its_outputs(tmp_path, capfd):
    last = catml.train(spec_in(tmp_path))
    assert last["epoch"] == 2 and last["step"] == 100 and last["eval_on"] == "held_out"
    assert sorted(last["eval"]["accuracy"]) == ["diagnosis_g", "diagnosis_h", "g_after_f"]
    out = tmp_path / "out"
    lines = capfd.readouterr().err.splitlines()
    assert [line.split("  ")[0] for line in lines[:2]] == ["epoch 1/2", "epoch 2/2"]
    assert lines[2] == (f"wrote checkpoint {out / 'checkpoint.safetensors'}, "
                        f"metrics {out / 'metrics.jsonl'}, plot {out / 'loss.svg'}")
    metrics = (out / "metrics.jsonl").read_text().splitlines()
    assert len(metrics) == 2
    # The returned dict is the metrics file's last line.
    assert json.loads(metrics[-1]) == last


def test_resume_of_a_finished_run_returns_its_metrics(tmp_path, capfd):
    spec = spec_in(tmp_path)
    first = catml.train(spec, quiet=True)
    assert catml.train(spec, resume=True, quiet=True) == first
    assert capfd.readouterr().err == ""
    # A changed spec is not the same run: resuming it is refused, naming the difference.
    spec.write_text(spec.read_text().replace("epochs = 2", "epochs = 3"))
    with pytest.raises(catml.ValueError, match="epochs: 2, now 3"):
        catml.train(spec, resume=True)


def test_a_spec_mistake_is_a_value_error_and_writes_nothing(tmp_path):
    spec = spec_in(tmp_path, lambda t: t.replace('left = ["h"]', 'left = ["q"]'))
    with pytest.raises(catml.ValueError) as e:
        catml.train(spec)
    assert str(e.value) == f'{spec}: equations[0].left: unknown arrow "q"'
    assert not (tmp_path / "out").exists()


def test_a_missing_spec_names_the_file(tmp_path):
    with pytest.raises(catml.ValueError, match="nothing.toml"):
        catml.train(tmp_path / "nothing.toml")
