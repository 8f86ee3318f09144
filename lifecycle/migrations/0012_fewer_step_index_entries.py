"""Two indexes fewer to write on every step: a step's requirement_id is covered by one_step_per_attempt's index
(it leads with requirement_id), and a transition's actor_user is indexed only where set.

The old indexes are dropped by name, without the drop-and-re-add of the foreign keys that AlterField would run
(which re-checks every row of both tables)."""
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

STEP_INDEX = "lifecycle_step_requirement_id_4abe8f2b"
ACTOR_INDEX = "lifecycle_statetransition_actor_user_id_ea0dee3c"


class Migration(migrations.Migration):

    dependencies = [
        ('lifecycle', '0011_run_settings'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name='statetransition',
                    name='actor_user',
                    field=models.ForeignKey(blank=True, db_index=False, null=True,
                                            on_delete=django.db.models.deletion.SET_NULL, to=settings.AUTH_USER_MODEL),
                ),
                migrations.AlterField(
                    model_name='step',
                    name='requirement',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE,
                                            related_name='steps', to='lifecycle.requirement'),
                ),
            ],
            database_operations=[
                migrations.RunSQL(f'DROP INDEX IF EXISTS "{STEP_INDEX}"',
                                  f'CREATE INDEX "{STEP_INDEX}" ON "lifecycle_step" ("requirement_id")'),
                migrations.RunSQL(f'DROP INDEX IF EXISTS "{ACTOR_INDEX}"',
                                  f'CREATE INDEX "{ACTOR_INDEX}" ON "lifecycle_statetransition" ("actor_user_id")'),
            ],
        ),
        migrations.AddIndex(
            model_name='statetransition',
            index=models.Index(condition=models.Q(('actor_user__isnull', False)), fields=['actor_user'],
                               name='transition_by_user'),
        ),
    ]
