"""Names of the composition services, without type support (see ``composition_interfaces``: no composable nodes)."""


class _Service:
    """A service name only: creating a ROS client or server of it fails (no type support)."""

    class Request:
        pass

    class Response:
        pass


class LoadNode(_Service):
    pass


class UnloadNode(_Service):
    pass


class ListNodes(_Service):
    pass
