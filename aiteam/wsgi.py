import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "aiteam.settings")
application = get_wsgi_application()

from aiteam.startup import refuse_bad_settings, refuse_uncollected_static  # noqa: E402 - once Django is set up

refuse_bad_settings()
refuse_uncollected_static()
