"""Drop aiteam_expect_one: the write-behind engine that raised through it is gone (docs/adr/); services lock rows
with select_for_update and save them with the ORM. PostgreSQL only, as the function was; reversing creates it
again."""
from importlib import import_module

from django.db import migrations

created = import_module("lifecycle.migrations.0013_expect_one_row")


class Migration(migrations.Migration):

    dependencies = [
        ('lifecycle', '0017_notification_requeue_spacing'),
    ]

    operations = [
        migrations.RunPython(created.on_postgresql(created.DROP), created.on_postgresql(created.CREATE), elidable=False),
    ]
