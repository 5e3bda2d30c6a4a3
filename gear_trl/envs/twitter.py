"""TwitterAPI: BFCL's social-media posting API (authenticate, post, comment, retweet, follow, ...).

Written from BFCL's function documentation (`multi_turn_func_doc/posting_api.json`). State, in BFCL's
`initial_config` format:

    {"username": str, "password": str, "authenticated": bool,
     "tweets": {"<id>": {"id", "username", "content", "tags", "mentions"}},
     "comments": {"<tweet id>": [{"username": str, "comment": str}]},
     "retweets": {username: [tweet id, ...]}, "following_list": [username, ...], "tweet_counter": int}

A new tweet gets id `tweet_counter`, which then increments. Tools the documentation describes as acting "for the
authenticated user" (post, comment, retweet, follow, unfollow, list following) fail until `authenticate_twitter`
succeeds (or the configuration says `authenticated: true`).
"""

from typing import Any

from .base import APIEnvironment, ToolError

DEFAULT_STATE: dict[str, Any] = {
    "username": "john",
    "password": "john123",
    "authenticated": False,
    "tweets": {},
    "comments": {},
    "retweets": {},
    "following_list": ["alice", "bob"],
    "tweet_counter": 0,
}
"""BFCL's default TwitterAPI scenario (data from the bfcl-eval package, Apache-2.0), used for keys a task omits."""


class TwitterAPI(APIEnvironment):
    """A social-media account: post tweets, comment, retweet, mention and follow users."""

    class_name = "TwitterAPI"
    default_state = DEFAULT_STATE

    def _normalize(self, state: dict[str, Any]) -> dict[str, Any]:
        state["tweets"] = {str(key): tweet for key, tweet in (state["tweets"] or {}).items()}
        state["comments"] = {str(key): comments for key, comments in (state["comments"] or {}).items()}
        state["retweets"] = {user: list(ids) for user, ids in (state["retweets"] or {}).items()}
        state["following_list"] = list(state["following_list"] or [])
        return state

    def _require_auth(self) -> None:
        if not self._state["authenticated"]:
            raise ToolError("User not authenticated. Please authenticate before performing this action.")

    def _tweet(self, tweet_id: Any) -> dict[str, Any]:
        if isinstance(tweet_id, bool) or not isinstance(tweet_id, (int, str)):
            raise ToolError(f"tweet_id must be an integer, got {tweet_id!r}.")
        tweet = self._state["tweets"].get(str(tweet_id))
        if tweet is None:
            raise ToolError(f"Tweet with ID {tweet_id} not found.")
        return tweet

    def authenticate_twitter(self, username: str, password: str) -> str:
        """Authenticate a user with username and password.

        Args:
            username: Username of the user.
            password: Password of the user.

        Returns:
            JSON object {"authentication_status": bool}.
        """
        ok = username == self._state["username"] and password == self._state["password"]
        if ok:
            self._state["authenticated"] = True
        return {"authentication_status": ok}

    def posting_get_login_status(self) -> str:
        """Get the login status of the current user.

        Returns:
            JSON object {"login_status": bool}.
        """
        return {"login_status": bool(self._state["authenticated"])}

    def post_tweet(self, content: str, tags: list[str] | None = None, mentions: list[str] | None = None) -> str:
        """Post a tweet for the authenticated user.

        Args:
            content: Content of the tweet.
            tags: List of tags for the tweet. Tag name should start with #. This is only relevant if the user wants
                to add tags to the tweet. Defaults to no tags.
            mentions: List of users mentioned in the tweet. Mention name should start with @. This is only relevant
                if the user wants to add mentions to the tweet. Defaults to no mentions.

        Returns:
            JSON object of the posted tweet {"id", "username", "content", "tags", "mentions"}.
        """
        self._require_auth()
        if not isinstance(content, str):
            raise ToolError(f"content must be a string, got {content!r}.")
        for name, values in (("tags", tags), ("mentions", mentions)):
            if values is not None and (not isinstance(values, list) or not all(isinstance(v, str) for v in values)):
                raise ToolError(f"{name} must be a list of strings, got {values!r}.")
        tweet_id = self._state["tweet_counter"]
        tweet = {
            "id": tweet_id,
            "username": self._state["username"],
            "content": content,
            "tags": list(tags or []),
            "mentions": list(mentions or []),
        }
        self._state["tweets"][str(tweet_id)] = tweet
        self._state["tweet_counter"] = tweet_id + 1
        return tweet

    def retweet(self, tweet_id: int) -> str:
        """Retweet a tweet for the authenticated user.

        Args:
            tweet_id: ID of the tweet to retweet.

        Returns:
            JSON object {"retweet_status": str}.
        """
        self._require_auth()
        tweet = self._tweet(tweet_id)
        retweeted = self._state["retweets"].setdefault(self._state["username"], [])
        if tweet["id"] in retweeted:
            return {"retweet_status": "Already retweeted"}
        retweeted.append(tweet["id"])
        return {"retweet_status": "Successfully retweeted"}

    def comment(self, tweet_id: int, comment_content: str) -> str:
        """Comment on a tweet for the authenticated user.

        Args:
            tweet_id: ID of the tweet to comment on.
            comment_content: Content of the comment.

        Returns:
            JSON object {"comment_status": str}.
        """
        self._require_auth()
        tweet = self._tweet(tweet_id)
        if not isinstance(comment_content, str):
            raise ToolError(f"comment_content must be a string, got {comment_content!r}.")
        comments = self._state["comments"].setdefault(str(tweet["id"]), [])
        comments.append({"username": self._state["username"], "comment": comment_content})
        return {"comment_status": "Comment added successfully"}

    def mention(self, tweet_id: int, mentioned_usernames: list[str]) -> str:
        """Mention specified users in a tweet.

        Args:
            tweet_id: ID of the tweet where users are mentioned.
            mentioned_usernames: List of usernames to be mentioned.

        Returns:
            JSON object {"mention_status": str}.
        """
        tweet = self._tweet(tweet_id)
        if not isinstance(mentioned_usernames, list) or not all(isinstance(u, str) for u in mentioned_usernames):
            raise ToolError(f"mentioned_usernames must be a list of strings, got {mentioned_usernames!r}.")
        mentions = tweet.setdefault("mentions", [])
        for user in mentioned_usernames:
            if user not in mentions:
                mentions.append(user)
        return {"mention_status": "Users mentioned successfully"}

    def follow_user(self, username_to_follow: str) -> str:
        """Follow a user for the authenticated user.

        Args:
            username_to_follow: Username of the user to follow.

        Returns:
            JSON object {"follow_status": bool}: true if followed, false if already following.
        """
        self._require_auth()
        if username_to_follow in self._state["following_list"]:
            return {"follow_status": False}
        self._state["following_list"].append(username_to_follow)
        return {"follow_status": True}

    def unfollow_user(self, username_to_unfollow: str) -> str:
        """Unfollow a user for the authenticated user.

        Args:
            username_to_unfollow: Username of the user to unfollow.

        Returns:
            JSON object {"unfollow_status": bool}: true if unfollowed, false if not following.
        """
        self._require_auth()
        if username_to_unfollow not in self._state["following_list"]:
            return {"unfollow_status": False}
        self._state["following_list"].remove(username_to_unfollow)
        return {"unfollow_status": True}

    def list_all_following(self) -> str:
        """List all users that the authenticated user is following.

        Returns:
            JSON object {"following_list": list of usernames}.
        """
        self._require_auth()
        return {"following_list": list(self._state["following_list"])}

    def get_tweet(self, tweet_id: int) -> str:
        """Retrieve a specific tweet.

        Args:
            tweet_id: ID of the tweet to retrieve.

        Returns:
            JSON object of the tweet {"id", "username", "content", "tags", "mentions"}.
        """
        return self._tweet(tweet_id)

    def get_user_tweets(self, username: str) -> str:
        """Retrieve all tweets from a specific user.

        Args:
            username: Username of the user whose tweets to retrieve.

        Returns:
            JSON object {"user_tweets": list of tweets}.
        """
        return {"user_tweets": [t for t in self._state["tweets"].values() if t.get("username") == username]}

    def search_tweets(self, keyword: str) -> str:
        """Search for tweets containing a specific keyword (case-insensitive).

        Args:
            keyword: Keyword to search for in the content of the tweets.

        Returns:
            JSON object {"matching_tweets": list of tweets}.
        """
        needle = str(keyword).lower()
        tweets = self._state["tweets"].values()
        return {"matching_tweets": [t for t in tweets if needle in str(t.get("content", "")).lower()]}

    def get_tweet_comments(self, tweet_id: int) -> str:
        """Retrieve all comments for a specific tweet.

        Args:
            tweet_id: ID of the tweet to retrieve comments for.

        Returns:
            JSON object {"comments": list of {"username": str, "content": str}}.
        """
        tweet = self._tweet(tweet_id)
        comments = self._state["comments"].get(str(tweet["id"]), [])
        return {
            "comments": [
                {"username": c.get("username", c.get("user")), "content": c.get("comment", c.get("content"))}
                for c in comments
            ]
        }

    def get_user_stats(self, username: str) -> str:
        """Get statistics for a specific user.

        Args:
            username: Username of the user to get statistics for.

        Returns:
            JSON object {"tweet_count": int, "following_count": int, "retweet_count": int}.
        """
        tweets = [t for t in self._state["tweets"].values() if t.get("username") == username]
        following = len(self._state["following_list"]) if username == self._state["username"] else 0
        return {
            "tweet_count": len(tweets),
            "following_count": following,
            "retweet_count": len(self._state["retweets"].get(username, [])),
        }
