from urllib.parse import urlencode

from urls import join


class Client:
    def __init__(self, base_url):
        self.base_url = base_url

    def url(self, *path, **query):
        """The URL of an API call."""
        url = join(self.base_url, *(str(part) for part in path))
        if query:
            url += "?" + urlencode(sorted(query.items()))
        return url
