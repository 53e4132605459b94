"""add own_label_fits: a repository's own labels' thresholds and heads (with their words), fitted off the labelling path

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03 10:00:00

"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = '0010'
down_revision: Union[str, Sequence[str], None] = '0009'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Upgrade schema."""
    op.create_table('own_label_fits',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('repository_id', sa.Integer(), nullable=False),
    sa.Column('model_version', sa.String(length=64), nullable=False),
    sa.Column('key', sa.JSON(), nullable=False),
    sa.Column('labels', sa.JSON(), nullable=False),
    sa.Column('weights', sa.LargeBinary(), nullable=True),
    sa.Column('words', sa.JSON(), nullable=True),
    sa.Column('fitted_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['repository_id'], ['repositories.id'],
                            name=op.f('fk_own_label_fits_repository_id_repositories')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_own_label_fits')),
    sa.UniqueConstraint('repository_id', name=op.f('uq_own_label_fits_repository_id'))
    )


def downgrade() -> None:
    """Downgrade schema."""
    op.drop_table('own_label_fits')
