"""Study definitions shipped with embstab (``embstab study NAME.yaml`` finds them here).

Read them with ``importlib.resources.files("embstab.pipelines")``.
"""
