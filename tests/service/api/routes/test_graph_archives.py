"""POST /v1/graphs with what users save: a zipped SavedModel folder and a .keras file (imported in a child
process, as `placer import` imports them); bad archives are 4xx before anything is read."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

ZIP = {"content-type": "application/zip"}


def zip_folder(folder: Path, top: str = "") -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                z.write(path, top + str(path.relative_to(folder)))
    return buf.getvalue()


def test_a_zipped_saved_model_is_imported_with_its_batch_and_signature(client, saved_models):
    body = zip_folder(saved_models["saved_model"], "mlp/")
    r = client.post("/v1/graphs?batch=8&signature=serve&name=mlp", content=body, headers=ZIP)
    assert r.status_code == 201, r.text
    assert r.json()["source"] == "saved_model"
    graph = client.get(f"/v1/graphs/{r.json()['id']}?include_graph=true").json()["graph"]
    assert graph["meta"]["signature"] == "serve" and graph["meta"]["inputs"][0]["shape"] == [8, 8]
    r = client.post("/v1/graphs?batch=8&signature=nope", content=body, headers=ZIP)
    assert r.status_code == 422
    assert r.json()["detail"] == ("upload: the archive has no signature 'nope'; give one of serve, serving_default "
                                  "(?signature=NAME)")


def test_a_keras_file_is_a_training_step(client, saved_models):
    body = saved_models["compiled"].read_bytes()
    r = client.post("/v1/graphs?batch=4", content=body, headers={"content-type": "application/octet-stream"})
    assert r.status_code == 201, r.text
    assert r.json()["source"] == "keras" and r.json()["name"] == "graph"
    graph = client.get(f"/v1/graphs/{r.json()['id']}?include_graph=true").json()["graph"]
    assert graph["meta"]["optimizer"] == "Adam" and graph["meta"]["training"] is True


@pytest.mark.parametrize("query, detail", [
    ("", "upload: a .keras file's training step needs its batch size (?batch=B)"),
    ("?batch=4&signature=x", "upload: signature does not apply to a .keras file"),
    ("?batch=4&format=saved_model", "upload: format=saved_model but the archive holds a .keras file"),
    ("?batch=4&fetch=x", "upload: fetch applies to a GraphDef upload"),
])
def test_keras_options_that_do_not_apply_are_422(client, saved_models, query, detail):
    r = client.post(f"/v1/graphs{query}", content=saved_models["compiled"].read_bytes(), headers=ZIP)
    assert r.status_code == 422 and r.json()["detail"].startswith(detail), r.text


def test_an_uncompiled_keras_file_asks_for_the_query_parameters(client, saved_models):
    r = client.post("/v1/graphs?batch=2", content=saved_models["uncompiled"].read_bytes(), headers=ZIP)
    assert r.status_code == 422 and "give one (?loss=" in r.json()["detail"]
    r = client.post("/v1/graphs?batch=2&loss=mse&optimizer=sgd", content=saved_models["uncompiled"].read_bytes(),
                    headers=ZIP)
    assert r.status_code == 201, r.text


def test_bad_archives_are_4xx(make_client, saved_models):
    client = make_client(max_inflated_bytes=100_000)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("m/saved_model.pb", b"")
        z.writestr("m/zeros", b"\0" * 1_000_000)
    r = client.post("/v1/graphs", content=buf.getvalue(), headers=ZIP)
    assert r.status_code == 413 and "max_inflated_bytes" in r.json()["detail"]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("saved_model.pb", b"")
        z.writestr("../../outside", b"x")
    r = client.post("/v1/graphs", content=buf.getvalue(), headers=ZIP)
    assert r.status_code == 422 and "has a '..' part" in r.json()["detail"]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("m/variables/variables.index", b"")
    r = client.post("/v1/graphs", content=buf.getvalue(), headers=ZIP)
    assert r.status_code == 422 and "neither a SavedModel" in r.json()["detail"]
    # saved_model.pb there, but not a SavedModel TensorFlow can load (its variables missing, the proto empty)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.write(saved_models["saved_model"] / "saved_model.pb", "saved_model.pb")
    r = client.post("/v1/graphs?batch=2", content=buf.getvalue(), headers=ZIP)
    assert r.status_code == 422 and r.json()["detail"].startswith("upload: the archive: TensorFlow cannot load")
    assert "/tmp" not in r.json()["detail"]
