# expect: error FORBIDDEN
async def fetch():
    return 1
