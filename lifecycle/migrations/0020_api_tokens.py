"""API tokens stored as digests; rest_framework.authtoken's plaintext keys converted, then deleted.

rest_framework.authtoken is no longer installed, so its table is read with plain SQL when it exists (an
install from before this release) and is simply absent on a new one. Each old key becomes an ApiToken
holding only the key's SHA-256, expiring AITEAM_TOKEN_TTL_DAYS after the upgrade, so existing clients keep
working until then; the plaintext rows are deleted. The empty table stays (docs/operations.md).
"""
import hashlib
from datetime import UTC, datetime, timedelta

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models
from django.utils import timezone
from django.utils.dateparse import parse_datetime


def convert_drf_tokens(connection, api_token_model, *, now: datetime, ttl_days: int) -> int:
    """Hash every authtoken_token key into an ApiToken and delete the plaintext rows; returns how many."""
    if "authtoken_token" not in connection.introspection.table_names():
        return 0
    q = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {q('key')}, {q('user_id')}, {q('created')} FROM {q('authtoken_token')}")
        rows = cursor.fetchall()
        api_token_model.objects.using(connection.alias).bulk_create([
            api_token_model(user_id=user_id, name="converted at upgrade", prefix=key[:8],
                            digest=hashlib.sha256(key.encode()).hexdigest(), created_at=_aware(created, now),
                            expires_at=now + timedelta(days=ttl_days))
            for key, user_id, created in rows])
        cursor.execute(f"DELETE FROM {q('authtoken_token')}")
    return len(rows)


def _aware(value, default: datetime) -> datetime:
    """A timestamp as a raw cursor returns it (text on SQLite, naive UTC without time zone support)."""
    if isinstance(value, str):
        value = parse_datetime(value)
    if value is None:
        return default
    return value if timezone.is_aware(value) else value.replace(tzinfo=UTC)


def convert(apps, schema_editor):
    convert_drf_tokens(schema_editor.connection, apps.get_model("lifecycle", "ApiToken"), now=timezone.now(),
                       ttl_days=getattr(settings, "AITEAM_TOKEN_TTL_DAYS", 90))


class Migration(migrations.Migration):

    dependencies = [
        ('lifecycle', '0019_requirement_replay_of_help_text'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='ApiToken',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(help_text='what the token is for, e.g. the client or machine using it',
                                          max_length=100)),
                ('prefix', models.CharField(db_index=True, editable=False, max_length=8,
                                            help_text="the token's first characters, to find it and tell it apart")),
                ('digest', models.CharField(editable=False, help_text='SHA-256 of the whole token', max_length=64, unique=True)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now, editable=False)),
                ('expires_at', models.DateTimeField(blank=True, help_text='empty: AITEAM_TOKEN_TTL_DAYS from now')),
                ('last_used_at', models.DateTimeField(blank=True, editable=False, null=True,
                                                      help_text='updated at most once a minute')),
                ('revoked_at', models.DateTimeField(blank=True, editable=False, null=True)),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='api_tokens',
                                           to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'verbose_name': 'API token',
                'ordering': ['-created_at'],
            },
        ),
        migrations.RunPython(convert, migrations.RunPython.noop),
    ]
