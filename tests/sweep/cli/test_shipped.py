"""`stitchsweep init` and the shipped spaces by name on the command line (`plan NAME`, `run NAME`)."""

from sweep.cli import EXIT_BAD_INPUT, main


def test_plan_takes_a_shipped_spaces_name_from_any_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["plan", "quickstart"]) == 0
    assert capsys.readouterr().out.startswith("sweep quickstart:")
    assert main(["plan", "a_first_study.yaml", "stitching.seeds=[0]"]) == 0  # NAME.yaml, with an override
    assert capsys.readouterr().out.startswith("sweep first_study: 2 donors, 12 trials")


def test_an_unknown_name_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for command in (["plan", "quickstrat"], ["run", "quickstrat", "--storage", str(tmp_path / "r")]):
        assert main(command) == EXIT_BAD_INPUT
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "did you mean quickstart?" in err, err
    assert not (tmp_path / "r").exists()


def test_init_copies_here_and_the_copy_plans(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["init", "a_first_study"]) == 0
    out = capsys.readouterr().out
    assert "wrote a_first_study.yaml" in out and "next: stitchsweep plan a_first_study.yaml" in out
    assert (tmp_path / "shared" / "fashion_mnist_small.yaml").is_file()
    assert main(["plan", "a_first_study.yaml"]) == 0
    assert capsys.readouterr().out.startswith("sweep first_study:")


def test_init_into_a_folder_refuses_to_overwrite_and_lists_the_names(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["init", "quickstart", "studies"]) == 0
    assert "next: stitchsweep plan studies/quickstart.yaml" in capsys.readouterr().out
    (tmp_path / "studies" / "quickstart.yaml").write_text("# mine\n")
    assert main(["init", "quickstart", "studies"]) == EXIT_BAD_INPUT
    assert "init never overwrites" in capsys.readouterr().err
    assert (tmp_path / "studies" / "quickstart.yaml").read_text() == "# mine\n"
    assert main(["init", "--list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed[0].split()[0] == "quickstart" and any(line.startswith("jones_fmnist ") for line in listed)
