"""replay_of's help text stops naming a source file (the replay service moved to lifecycle/replay/runs.py)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('lifecycle', '0018_drop_expect_one_row'),
    ]

    operations = [
        migrations.AlterField(
            model_name='requirement',
            name='replay_of',
            field=models.ForeignKey(blank=True, help_text='the run this one replays from its recordings', null=True, on_delete=django.db.models.deletion.PROTECT, related_name='replays', to='lifecycle.requirement'),
        ),
    ]
