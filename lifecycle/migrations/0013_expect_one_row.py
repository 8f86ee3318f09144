"""aiteam_expect_one(n): true when n is 1, else an error with SQLSTATE AIT01 (aiteam.db.write_behind.RowsChanged).

A check queued by write_behind.expect_unchanged counts the rows it locked that are still as they were read; sent
in one pipeline with the transaction's writes and COMMIT, its error is what stops that COMMIT when they are not.
PostgreSQL only: elsewhere nothing queues such a check."""
from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION aiteam_expect_one(n bigint) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF n <> 1 THEN
        RAISE EXCEPTION 'a row changed since it was read' USING ERRCODE = 'AIT01';
    END IF;
    RETURN true;
END
$$
"""
DROP = "DROP FUNCTION IF EXISTS aiteam_expect_one(bigint)"


def on_postgresql(sql):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(sql)
    return run


class Migration(migrations.Migration):

    dependencies = [
        ('lifecycle', '0012_fewer_step_index_entries'),
    ]

    operations = [
        migrations.RunPython(on_postgresql(CREATE), on_postgresql(DROP), elidable=False),
    ]
