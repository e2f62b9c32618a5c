"""Where cultura does not run Label Studio, annotators share one server and are not blind to each other: every
door that talks to Label Studio for the whole team (server status, push) says what holds there and what does
not; where it does, nothing is said (each annotator has a server of their own)."""
from __future__ import annotations

from cultura.annotate.people import isolation_note, personal_servers, server_status
from cultura.annotate.server import use_server


def test_a_shared_server_is_stated_where_cultura_does_not_run_label_studio(project, monkeypatch):
    monkeypatch.delenv("LABEL_STUDIO_URL", raising=False)
    use_server(project, "http://127.0.0.1:9", "not-a-real-key")            # elsewhere: no data dir
    assert not personal_servers(project)
    note = isolation_note(project)
    assert "NOT blind" in note and "http://127.0.0.1:9" in note and "drafts" in note and "server start" in note
    assert server_status(project)["isolation"] == note

    use_server(project, "http://127.0.0.1:9", "not-a-real-key", data_dir=project.root / "ls")
    assert personal_servers(project) and isolation_note(project) is None
    assert "isolation" not in server_status(project)

    monkeypatch.setenv("LABEL_STUDIO_URL", "http://ls.example.org")
    assert "http://ls.example.org" in isolation_note(project)
