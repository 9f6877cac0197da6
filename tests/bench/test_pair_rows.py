from bench.pair_rows import save_rows, stored_rows


def test_rows_come_back_only_with_the_settings_they_were_made_with(tmp_path):
    out = tmp_path / "rows.json"
    assert stored_rows(out, {"sweeps": 2}) == []  # no file yet
    save_rows(out, {"sweeps": 2}, [{"graph": "g", "cluster": "4gpu"}])
    assert stored_rows(out, {"sweeps": 2}) == [{"graph": "g", "cluster": "4gpu"}]
    assert stored_rows(out, {"sweeps": 4}) == []  # made with other settings: made again
